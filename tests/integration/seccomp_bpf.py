# SPDX-License-Identifier: MIT
"""The seccomp programs a running process is under, read from outside
(ptrace's PTRACE_SECCOMP_GET_FILTER: root, CAP_SYS_ADMIN, a kernel with
CONFIG_CHECKPOINT_RESTORE) and run here on a system call of our choosing, as
the kernel runs them: every program, the strictest action wins. So a test
learns what the kernel does to the daemon's own socket(AF_PACKET) or
mmap(PROT_WRITE|PROT_EXEC) without making the daemon try it.

verdict(programs, nr, args, arch) -> ('allow'|'errno'|'kill'|'trap'|…, data).
Only classic BPF as libseccomp emits it (loads of struct seccomp_data,
ALU, jumps, scratch memory, returns); anything else raises."""
import ctypes
import os
import struct

PTRACE_DETACH = 17
PTRACE_SEIZE = 0x4206
PTRACE_INTERRUPT = 0x4207
PTRACE_SECCOMP_GET_FILTER = 0x420c
WALL = 0x40000000

AUDIT_ARCH_X86_64 = 0xc000003e
AUDIT_ARCH_I386 = 0x40000003
X32_SYSCALL_BIT = 0x40000000

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]

# SECCOMP_RET_* (action in the high 16 bits; compared as signed: the lowest wins)
ACTIONS = {0x80000000: 'kill', 0x00000000: 'kill-thread', 0x00030000: 'trap', 0x00050000: 'errno',
           0x7fc00000: 'notify', 0x7ff00000: 'trace', 0x7ffc0000: 'log', 0x7fff0000: 'allow'}


def _ptrace(req, pid, addr, data):
    r = _libc.ptrace(req, pid, addr, data)
    if r < 0:
        e = ctypes.get_errno()
        raise OSError(e, 'ptrace(%#x, %d): %s' % (req, pid, os.strerror(e)))
    return r


def programs(pid):
    """The seccomp programs of pid (each a list of (code, jt, jf, k)), the
    newest first. The process is stopped for the time of the reads."""
    _ptrace(PTRACE_SEIZE, pid, None, None)
    try:
        _ptrace(PTRACE_INTERRUPT, pid, None, None)
        os.waitpid(pid, WALL)
        out = []
        while True:
            try:
                n = _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, len(out), None)
            except OSError as e:
                if e.errno == 2:  # ENOENT: no program at that index
                    return out
                raise
            buf = ctypes.create_string_buffer(n * 8)
            _ptrace(PTRACE_SECCOMP_GET_FILTER, pid, len(out), buf)
            out.append([struct.unpack_from('=HBBI', buf.raw, 8 * i) for i in range(n)])
    finally:
        _libc.ptrace(PTRACE_DETACH, pid, None, None)


def _data(nr, args, arch):
    args = list(args) + [0] * (6 - len(args))
    return struct.pack('=iIQ6Q', nr, arch, 0, *[a & 0xffffffffffffffff for a in args])


def run(prog, data):
    """The 32-bit return value of one classic BPF program on data."""
    a = x = 0
    mem = [0] * 16
    pc = 0
    for _ in range(100000):
        code, jt, jf, k = prog[pc]
        pc += 1
        cls, op = code & 0x07, code & 0xf0
        src = x if code & 0x08 else k
        if cls == 0x00 and code & 0xe0 == 0x20 and code & 0x18 == 0x00:  # LD W ABS
            a = struct.unpack_from('=I', data, k)[0]
        elif cls == 0x00 and code & 0xe0 == 0x00:  # LD IMM
            a = k
        elif cls == 0x00 and code & 0xe0 == 0x60:  # LD MEM
            a = mem[k]
        elif cls == 0x01 and code & 0xe0 == 0x00:  # LDX IMM
            x = k
        elif cls == 0x01 and code & 0xe0 == 0x60:  # LDX MEM
            x = mem[k]
        elif cls == 0x02:  # ST
            mem[k] = a
        elif cls == 0x03:  # STX
            mem[k] = x
        elif cls == 0x04:  # ALU
            f = {0x00: lambda: a + src, 0x10: lambda: a - src, 0x20: lambda: a * src,
                 0x40: lambda: a | src, 0x50: lambda: a & src, 0x60: lambda: a << src,
                 0x70: lambda: a >> src, 0x80: lambda: -a, 0xa0: lambda: a ^ src}
            if op not in f:
                raise ValueError('BPF ALU op %#x' % code)
            a = f[op]() & 0xffffffff
        elif cls == 0x05:  # JMP
            if op == 0x00:
                pc += k
                continue
            cond = {0x10: a == src, 0x20: a > src, 0x30: a >= src, 0x40: bool(a & src)}.get(op)
            if cond is None:
                raise ValueError('BPF JMP op %#x' % code)
            pc += jt if cond else jf
        elif cls == 0x06:  # RET
            return a if code & 0x18 == 0x10 else k
        elif cls == 0x07:  # MISC: TAX, TXA
            if op == 0x00:
                x = a
            else:
                a = x
        else:
            raise ValueError('BPF code %#x' % code)
    raise ValueError('BPF program did not return')


def verdict(progs, nr, args=(), arch=AUDIT_ARCH_X86_64):
    """What the kernel does to system call nr(args) of the process whose
    programs these are: (action name, data: the errno for 'errno')."""
    data = _data(nr, args, arch)
    best = None
    for p in progs:
        r = run(p, data)
        act = r & 0xffff0000
        signed = act - (1 << 32) if act & 0x80000000 else act
        if best is None or signed < best[0]:
            best = (signed, r)
    if best is None:
        return ('allow', 0)
    act = best[1] & 0xffff0000
    return (ACTIONS.get(act, hex(act)), best[1] & 0xffff)
