/* The storm benchmarks' child: blocks reading stdin until every writer is
 * gone, then exits 0. Static, like trivial.c. */
#include <unistd.h>

int main(void) {
        char c;
        while (read(STDIN_FILENO, &c, 1) > 0)
                ;
        return 0;
}
