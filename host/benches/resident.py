#!/usr/bin/env python3
"""Which pages of a running chorus's binary are resident, by ELF section,
and how much of each crate's code (by symbol) they hold: where the
file-backed part of its RSS comes from. Linux only; reads
/proc/PID/pagemap, so run it as the process's owner with CAP_SYS_ADMIN
(root) for page flags. Usage: host/benches/resident.py PID [--crates]"""
import bisect, collections, os, re, struct, subprocess, sys

PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_pages(pid, binary):
    """File offsets of the binary's resident pages, and whether each is
    private (copied on write: relocated data)."""
    maps = []
    for line in open(f"/proc/{pid}/maps"):
        parts = line.split()
        if len(parts) >= 6 and os.path.realpath(parts[5]) == binary:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            maps.append((lo, hi, int(parts[2], 16)))
    pages = {}
    with open(f"/proc/{pid}/pagemap", "rb") as pagemap:
        for lo, hi, offset in maps:
            pagemap.seek(lo // PAGE * 8)
            entries = pagemap.read((hi - lo) // PAGE * 8)
            for i in range((hi - lo) // PAGE):
                (entry,) = struct.unpack_from("<Q", entries, i * 8)
                if entry >> 63 & 1:  # present
                    pages[offset + i * PAGE] = not entry >> 61 & 1  # not a file page
    return pages


def sections(binary):
    out = subprocess.run(["readelf", "-SW", binary], capture_output=True, text=True).stdout
    found = []
    for m in re.finditer(r"\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", out):
        name, addr, offset, size = m.group(1), *(int(g, 16) for g in m.groups()[1:])
        if size and offset:
            found.append((name, offset, size, addr))
    return found


def crate_of(symbol):
    m = re.match(r"[<&\s]*(?:dyn |mut )?([A-Za-z_][A-Za-z0-9_]*)::", symbol)
    return m.group(1) if m else "(C and unnamed)"


def main():
    pid = int(sys.argv[1])
    binary = os.path.realpath(f"/proc/{pid}/exe")
    pages = resident_pages(pid, binary)
    secs = sections(binary)
    total, private = collections.Counter(), collections.Counter()
    for offset, is_private in pages.items():
        name = next((s[0] for s in secs if s[1] <= offset < s[1] + s[2]), "(headers)")
        total[name] += PAGE
        private[name] += PAGE * is_private
    print(f"{binary}: {sum(total.values()) / 2**20:.1f} MiB of its pages resident")
    for name, size in total.most_common():
        whole = next((s[2] for s in secs if s[0] == name), 0)
        print(f"  {name:20} {size / 2**20:6.2f} MiB of {whole / 2**20:6.2f} MiB"
              f" (copied on write: {private[name] / 2**20:.2f} MiB)")
    if "--crates" not in sys.argv:
        return
    text = next(s for s in secs if s[0] == ".text")
    symbols = []
    nm = subprocess.run(["nm", "-C", "-S", "--defined-only", binary], capture_output=True, text=True)
    for line in nm.stdout.splitlines():
        parts = line.split(" ", 3)
        if len(parts) == 4 and parts[2] in "tTwW":
            symbols.append((int(parts[0], 16), int(parts[1], 16), crate_of(parts[3])))
    symbols.sort()
    starts = [s[0] for s in symbols]
    held, whole = collections.Counter(), collections.Counter()
    for _, size, crate in symbols:
        whole[crate] += size
    for offset in pages:
        if not text[1] <= offset < text[1] + text[2]:
            continue
        lo = offset + text[3] - text[1]
        i = max(bisect.bisect_right(starts, lo) - 1, 0)
        while i < len(symbols) and symbols[i][0] < lo + PAGE:
            start, size, crate = symbols[i]
            held[crate] += max(0, min(lo + PAGE, start + size) - max(lo, start))
            i += 1
    print("code resident by crate (KB resident of KB):")
    for crate, size in held.most_common(30):
        print(f"  {crate:32} {size / 1e3:7.0f} of {whole[crate] / 1e3:7.0f}")


main()
