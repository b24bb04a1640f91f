/* SPDX-License-Identifier: MIT */
/*
 * The smallest unit program for test_scale.py (issue 19): pause(2) forever,
 * without libc. A libc program's start-up (ld.so, the CPU features read
 * with cpuid, which traps in a VM) costs ~1-2 ms of CPU; 10,000 of them
 * started at once would measure the machine, not tend. x86-64 only: the
 * test uses `sleep infinity` elsewhere. Ends on any fatal signal.
 */
void _start(void) __attribute__((noreturn));
void _start(void) {
        for (;;) {
                long ret;
                __asm__ volatile("syscall" : "=a"(ret) : "a"(34L /* SYS_pause */) : "rcx", "r11", "memory");
                (void) ret;
        }
}
