#!/usr/bin/env python3
"""Per-kernel machine code of a cubin without cuobjdump: reads the ELF64
section table and prints, for each .text.<kernel> section, a key, its size in
bytes (SASS instructions = size / 16 on sm_90), the registers from the
section header's info field (bits 24-31, where nvcc keeps them) and a sha256
of the bytes. KEY_RE (optional) extracts the key from the mangled name, so
kernels whose names differ (e.g. an added template parameter) pair up.
  cubin_text.py FILE.cubin [KEY_RE]"""
import hashlib, re, struct, sys

def sections(path):
    d = open(path, 'rb').read()
    assert d[:4] == b'\x7fELF' and d[4] == 2, 'not an ELF64 file'
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3A)
    hdrs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    strtab = hdrs[shstrndx]
    def name(off):
        s = d[strtab[4] + off:]
        return s[:s.index(b'\0')].decode()
    for h in hdrs:
        yield name(h[0]), h, d[h[4]:h[4] + h[5]]

def main():
    key_re = re.compile(sys.argv[2]) if len(sys.argv) > 2 else None
    for n, h, data in sections(sys.argv[1]):
        if not n.startswith('.text.'):
            continue
        k = n[6:]
        if key_re:
            m = key_re.search(k)
            k = m.group(0) if m else k
        regs = (h[7] >> 24) & 0xff  # sh_info high byte: register count
        print(k, len(data), len(data) // 16, regs, hashlib.sha256(data).hexdigest()[:16])

main()
