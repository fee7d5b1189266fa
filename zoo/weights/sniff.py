"""What a file holds, told by its first bytes, so that a file that is not a checkpoint is named for what it is.

``sniff(path) -> (kind, description)``: kind is one of 'empty', 'zip' (torch's format since 1.6), 'pickle'
(torch's legacy format), 'safetensors', 'text' or 'other'; the description is a phrase for error messages
("a NumPy array (.npy)", "text starting 'hello'", ...). Only the first bytes are read.
"""
from __future__ import annotations

import pickletools
import struct
from pathlib import Path

HEAD_BYTES = 512
_SCAN_BYTES = 1 << 26  # pickles are scanned for imports in the first 64 MiB (a checkpoint's pickles come first)
#: What torch's own pickles import; anything else is code a pickle would import.
_TORCH_IMPORTS = ('torch.', 'collections.OrderedDict', '_codecs.encode')
#: Leading bytes of formats people mistake for checkpoints (kind 'other'), with what to call them.
_MAGIC = [(b'\x93NUMPY', 'a NumPy array (.npy)'), (b'\x89PNG\r\n\x1a\n', 'a PNG image'),
          (b'\xff\xd8\xff', 'a JPEG image'), (b'GIF8', 'a GIF image'), (b'\x1f\x8b', 'gzip-compressed data'),
          (b'%PDF', 'a PDF document'), (b'\x7fELF', 'an executable (ELF)'), (b'\x89HDF', 'an HDF5 file (.h5)')]


def _safetensors_header(head: bytes, size: int) -> bool:
    """safetensors: an 8-byte little-endian header length, then a JSON object that fits in the file."""
    if len(head) < 9:
        return False
    (length,) = struct.unpack('<Q', head[:8])
    return 0 < length <= size - 8 and head[8:9] == b'{'


def _as_text(head: bytes) -> str | None:
    try:
        text = head.decode('utf-8')
    except UnicodeDecodeError as err:  # a multi-byte character cut by the head's end is still text
        if err.start < len(head) - 3:
            return None
        text = head[:err.start].decode('utf-8')
    return text if text and all(c.isprintable() or c in '\t\r\n' for c in text) else None


def sniff(path) -> tuple[str, str]:
    """(kind, description) of the file at ``path`` from its first bytes (see the module docstring)."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, 'rb') as f:
        head = f.read(HEAD_BYTES)
    if not head:
        return 'empty', 'an empty file (0 bytes)'
    if head.startswith(b'PK\x03\x04'):
        return 'zip', 'a zip archive'
    if head[0] == 0x80 and len(head) > 1 and 2 <= head[1] <= 5:
        return 'pickle', f'a Python pickle (protocol {head[1]})'
    if _safetensors_header(head, size):
        return 'safetensors', 'safetensors weights'
    for magic, name in _MAGIC:
        if head.startswith(magic):
            return 'other', name
    text = _as_text(head)
    if text is not None:
        shown = text[:40] + ('...' if len(text) > 40 or size > len(head) else '')
        return 'text', f'text starting {shown!r}'
    return 'other', f"{size} bytes of unrecognised binary data (starting {head[:8].hex(' ')})"


def describe_object(value) -> str:
    """A phrase for what ``torch.load`` returned when it is not a mapping: 'a list of 3 items', 'a tensor ...'."""
    if hasattr(value, 'shape') and hasattr(value, 'dtype'):
        return f"a single {type(value).__name__} of shape {tuple(value.shape)}"
    if isinstance(value, (list, tuple, set)):
        return f"a {type(value).__name__} of {len(value)} items"
    return f"a {type(value).__name__}"


def pickle_imports(path) -> list[str]:
    """'module.name' of every global the pickles at the start of ``path`` import (GLOBAL, STACK_GLOBAL, INST),
    found by reading the opcodes without executing any, and that are not torch's own; the scan stops at the
    first byte that is not a pickle."""
    with open(path, 'rb') as f:
        data = f.read(_SCAN_BYTES)
    found, strings, position = [], [], 0
    while position < len(data):
        try:
            for opcode, arg, offset in pickletools.genops(data[position:]):
                if opcode.name in ('GLOBAL', 'INST'):
                    found.append(str(arg).replace(' ', '.'))
                elif opcode.name == 'STACK_GLOBAL' and len(strings) >= 2:
                    found.append(f'{strings[-2]}.{strings[-1]}')
                elif isinstance(arg, str):
                    strings.append(arg)
                if opcode.name == 'STOP':
                    position += offset + 1
                    break
            else:
                break
        except Exception:  # not (or no longer) a pickle: what was found so far is the answer
            break
    return [name for name in dict.fromkeys(found) if not name.startswith(_TORCH_IMPORTS)]
