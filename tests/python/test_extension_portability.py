"""The wheel bundled in the built extension zip runs on every Linux Blender runs on.

Blender's Linux builds run on glibc 2.28 (manylinux_2_28) and Blender never checks a wheel's glibc
tag: a wheel built against a newer glibc installs and then fails at `import`. So the wheel inside
the newest dist/sinew-*.zip (scripts/build_extension.sh) must carry a manylinux tag of 2.28 or
older, and its extension module must need no GLIBC_ symbol version newer than 2.28. The versions
are read from the ELF's version-needs section (.gnu.version_r, what the dynamic loader checks) with
the standard library only, and cross-checked with `objdump -T` where binutils is installed.
"""

from __future__ import annotations

import io
import re
import shutil
import struct
import subprocess
import tempfile
import zipfile
from pathlib import Path

import pytest

from sinew_py_wheel import REPO

GLIBC_FLOOR = (2, 28)
SHT_GNU_VERNEED = 0x6FFFFFFE


def _newest_zip() -> Path:
    zips = sorted((REPO / "dist").glob("sinew-*.zip"), key=lambda p: p.stat().st_mtime)
    if not zips:
        pytest.skip("no dist/sinew-*.zip: run scripts/build_extension.sh (./dev test does)")
    return zips[-1]


def _bundled_wheel(zip_path: Path) -> tuple[str, bytes]:
    with zipfile.ZipFile(zip_path) as z:
        wheels = [n for n in z.namelist() if re.search(r"(^|/)wheels/sinew-[^/]*\.whl$", n)]
        assert len(wheels) == 1, f"{zip_path.name}: expected one bundled sinew wheel, got {wheels}"
        return wheels[0].rsplit("/", 1)[-1], z.read(wheels[0])


def _extension_modules(wheel: bytes) -> dict[str, bytes]:
    with zipfile.ZipFile(io.BytesIO(wheel)) as w:
        return {n: w.read(n) for n in w.namelist() if n.endswith(".so")}


def glibc_versions_needed(elf: bytes) -> set[tuple[int, ...]]:
    """The GLIBC_x.y[.z] versions a 64-bit little-endian ELF needs (its .gnu.version_r entries)."""
    assert elf[:4] == b"\x7fELF", "not an ELF file"
    assert elf[4] == 2 and elf[5] == 1, "only 64-bit little-endian ELF files are read here"
    e_shoff, = struct.unpack_from("<Q", elf, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", elf, 0x3A)
    sections = []
    for i in range(e_shnum):
        # sh_name, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, sh_info, ...
        _, sh_type, _, _, sh_offset, sh_size, sh_link, sh_info = struct.unpack_from(
            "<IIQQQQII", elf, e_shoff + i * e_shentsize)
        sections.append((sh_type, sh_offset, sh_size, sh_link, sh_info))
    out: set[tuple[int, ...]] = set()
    for sh_type, offset, _size, link, count in sections:
        if sh_type != SHT_GNU_VERNEED:
            continue
        strtab = sections[link][1]

        def name(at: int) -> str:
            end = elf.index(b"\0", strtab + at)
            return elf[strtab + at:end].decode()

        need = offset
        for _ in range(count):
            _vn_version, vn_cnt, _vn_file, vn_aux, vn_next = struct.unpack_from("<HHIII", elf, need)
            aux = need + vn_aux
            for _ in range(vn_cnt):
                _hash, _flags, _other, vna_name, vna_next = struct.unpack_from("<IHHII", elf, aux)
                m = re.fullmatch(r"GLIBC_(\d+(?:\.\d+)+)", name(vna_name))
                if m:
                    out.add(tuple(int(x) for x in m.group(1).split(".")))
                aux += vna_next
            if not vn_next:
                break
            need += vn_next
    return out


def _platform_tags(wheel_name: str) -> list[str]:
    return wheel_name[:-len(".whl")].split("-")[-1].split(".")


def test_bundled_wheel_is_tagged_manylinux_2_28_or_older():
    wheel_name, _ = _bundled_wheel(_newest_zip())
    tags = _platform_tags(wheel_name)
    linux = [t for t in tags if "linux" in t]
    assert linux, f"{wheel_name}: no Linux platform tag"
    for tag in linux:
        m = re.fullmatch(r"manylinux_(\d+)_(\d+)_x86_64", tag)
        if m:
            assert (int(m.group(1)), int(m.group(2))) <= GLIBC_FLOOR, (
                f"{wheel_name} is tagged {tag}: it needs a newer glibc than Blender's Linux builds "
                "(2.28); build it with scripts/build_extension.sh (maturin --zig --compatibility manylinux_2_28)")
        else:
            # manylinux2014 (glibc 2.17), manylinux2010 (2.12), manylinux1 (2.5) are older;
            # linux_x86_64 is a host build with no promise at all.
            assert tag in ("manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"), (
                f"{wheel_name}: platform tag {tag} is not a manylinux tag of glibc <= 2.28")


def test_bundled_extension_module_needs_no_glibc_newer_than_2_28():
    wheel_name, wheel = _bundled_wheel(_newest_zip())
    modules = _extension_modules(wheel)
    assert modules, f"{wheel_name} holds no extension module"
    for name, elf in modules.items():
        needed = glibc_versions_needed(elf)
        assert needed, f"{name}: no GLIBC_ version needs found (not dynamically linked against glibc?)"
        newest = max(needed)
        assert newest <= GLIBC_FLOOR, (
            f"{wheel_name}: {name} needs GLIBC_{'.'.join(map(str, newest))}, newer than 2.28 "
            f"(all: {sorted('.'.join(map(str, v)) for v in needed)})")
        objdump = shutil.which("objdump")
        if objdump:
            with tempfile.NamedTemporaryFile(suffix=".so") as f:
                f.write(elf)
                f.flush()
                text = subprocess.run([objdump, "-T", f.name], check=True, capture_output=True, text=True).stdout
            seen = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", text)}
            # objdump -T lists the versions of the imported symbols; the version-needs section may
            # also list versions no symbol uses, never fewer.
            assert seen <= needed, (seen, needed)
            assert max(seen) <= GLIBC_FLOOR


def test_the_elf_reader_sees_a_host_library_s_glibc_versions():
    """The reader itself, on this interpreter's own libc-linked extension module or binary:
    every GLIBC_ version objdump lists is found."""
    objdump = shutil.which("objdump")
    if not objdump:
        pytest.skip("no objdump to compare with")
    import _ctypes  # a C extension module linked against glibc

    if not getattr(_ctypes, "__file__", None):
        pytest.skip("_ctypes is built into this interpreter")
    elf = Path(_ctypes.__file__).read_bytes()
    text = subprocess.run([objdump, "-T", _ctypes.__file__], check=True, capture_output=True, text=True).stdout
    seen = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+(?:\.\d+)+)", text)}
    assert seen and seen <= glibc_versions_needed(elf)
