/* The trivial program the spawn benchmarks run, linked statically so that the
 * dynamic loader does not dominate what is measured. */
int main(void) {
        return 0;
}
