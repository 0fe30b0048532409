# elfgen.py - writes small x86-64 ELF shared objects for the attack tests:
# one page of code that spins (a thread can run it through ctypes), with any
# number of function symbols, a GNU build-id, or neither.
#
# Layout: page 0 holds the ELF header, the program headers and the code
# (at CODE_VADDR); the notes, the symbol table, the string tables and the
# section headers follow. One PT_LOAD maps page 0 read+execute, so the file
# can be truncated to its first page without the code going away.
import struct

PAGE = 4096
CODE_OFF = 0x800
CODE_VADDR = CODE_OFF
# spin: jmp spin (eb fe), then nops; ret at SPIN_RET for a function that returns.
CODE = b"\xeb\xfe" + b"\x90" * 14 + b"\xc3"

EHDR = struct.Struct("<16sHHIQQQIHHHHHH")
PHDR = struct.Struct("<IIQQQQQQ")
SHDR = struct.Struct("<IIQQQQIIQQ")
SYM = struct.Struct("<IBBHQQ")

SHT_PROGBITS, SHT_SYMTAB, SHT_STRTAB, SHT_NOTE = 1, 2, 3, 7
STT_FUNC, STB_GLOBAL = 2, 1


def write(path, nsyms=0, build_id=None, sym_name="f%d", sym_size=16, first_names=()):
    """Writes the object to path. nsyms function symbols named sym_name % i
    (first_names override the first ones), each sym_size bytes from
    CODE_VADDR on (all but the first lie past the code: only their number
    matters); build_id: bytes for a .note.gnu.build-id. Returns the size."""
    shstr = b"\0.text\0.note.gnu.build-id\0.symtab\0.strtab\0.shstrtab\0"
    name_off = {n: shstr.index(b"\0" + n.encode() + b"\0") + 1
                for n in (".text", ".note.gnu.build-id", ".symtab", ".strtab", ".shstrtab")}
    note = b""
    if build_id:
        note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id
        note += b"\0" * (-len(note) % 4)
    out = bytearray(PAGE)
    off = PAGE
    note_off = off
    out += note
    off += len(note)
    off += -off % 8
    out += b"\0" * (off - len(out))
    # The symbols: the null one, then nsyms functions; names in .strtab.
    strtab = bytearray(b"\0")
    syms = [SYM.pack(0, 0, 0, 0, 0, 0)]
    pack = SYM.pack
    info = (STB_GLOBAL << 4) | STT_FUNC
    for i in range(nsyms):
        name = first_names[i] if i < len(first_names) else sym_name % i
        syms.append(pack(len(strtab), info, 0, 1, CODE_VADDR + i * sym_size, sym_size))
        strtab += name.encode() + b"\0"
    symtab_off = off
    symtab = b"".join(syms) if nsyms else b""
    out += symtab
    off += len(symtab)
    strtab_off = off
    if nsyms:
        out += strtab
        off += len(strtab)
    shstr_off = off
    out += shstr
    off += len(shstr)
    off += -off % 8
    out += b"\0" * (off - len(out))
    # Section headers: null, .text, [.note], [.symtab, .strtab], .shstrtab.
    shdrs = [SHDR.pack(0, 0, 0, 0, 0, 0, 0, 0, 0, 0),
             SHDR.pack(name_off[".text"], SHT_PROGBITS, 6, CODE_VADDR, CODE_OFF, len(CODE), 0, 0, 16, 0)]
    if note:
        shdrs.append(SHDR.pack(name_off[".note.gnu.build-id"], SHT_NOTE, 2, note_off, note_off,
                               len(note), 0, 0, 4, 0))
    if nsyms:
        strtab_index = len(shdrs) + 1
        shdrs.append(SHDR.pack(name_off[".symtab"], SHT_SYMTAB, 0, 0, symtab_off, len(symtab),
                               strtab_index, 1, 8, SYM.size))
        shdrs.append(SHDR.pack(name_off[".strtab"], SHT_STRTAB, 0, 0, strtab_off, len(strtab), 0, 0, 1, 0))
    shstrndx = len(shdrs)
    shdrs.append(SHDR.pack(name_off[".shstrtab"], SHT_STRTAB, 0, 0, shstr_off, len(shstr), 0, 0, 1, 0))
    shoff = off
    out += b"".join(shdrs)
    # Program headers: one PT_LOAD of page 0 (r-x), and the PT_NOTE.
    phdrs = [PHDR.pack(1, 5, 0, 0, 0, PAGE, PAGE, PAGE)]
    if note:
        phdrs.append(PHDR.pack(4, 4, note_off, note_off, note_off, len(note), len(note), 4))
    ident = b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
    out[0:EHDR.size] = EHDR.pack(ident, 3, 62, 1, CODE_VADDR, EHDR.size, shoff, 0, EHDR.size,
                                 PHDR.size, len(phdrs), SHDR.size, len(shdrs), shstrndx)
    at = EHDR.size
    for ph in phdrs:
        out[at:at + PHDR.size] = ph
        at += PHDR.size
    out[CODE_OFF:CODE_OFF + len(CODE)] = CODE
    with open(path, "wb") as f:
        f.write(out)
    return len(out)
