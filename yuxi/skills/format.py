"""The Agent Skills format: a directory with a ``SKILL.md`` (YAML front matter, then
Markdown instructions) and the files beside it.

Front matter: ``name`` (the slug) and ``description`` are required; ``license``,
``compatibility``, ``metadata`` and ``allowed-tools`` are optional, and yuxi reads one
more key, ``dependencies: {skills: [...], tools: [...], mcps: [...]}``: other skills it
builds on, built-in tools it needs (``allowed-tools`` counts too) and MCP servers whose
tools it uses. Unknown keys are kept as they are.

A skill's digest is the sha256 of its canonical file set (``yuxi.skill_digest`` in SQL
computes the same): every file in bytewise path order, each as its path, NUL, its length
in decimal, NUL and its bytes. Directories and ZIP archives are read with their paths
confined: absolute paths, ``..``, symbolic links and archives that inflate past the
size limit are refused.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from yuxi.skills.front_matter import FrontMatterError, load_front_matter

SKILL_FILE = "SKILL.md"
MAX_FILES = 500
MAX_BYTES = 16 * 1024 * 1024
"""What one skill may hold (the SQL function refuses more too)."""
MAX_ENTRIES = 4 * MAX_FILES
"""Members of a skill's ZIP archive, directories included."""
MAX_DIRECTORY_BYTES = 1024 * 1024
"""The central directory of a skill's ZIP archive: MAX_ENTRIES of 512 bytes each
(a real entry is its name and about 80 bytes)."""
_END_RECORD_DIRECTORY_SIZE = 5  # zipfile's _ECD_SIZE
DESCRIPTION_LIMIT = 1024

_SLUG = re.compile(r"^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$")
# MCP server slugs, as the MCP registry names them
_MCP_SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillFormatError(ValueError):
    """A skill that cannot be read: the message says what to fix."""


def is_skill_slug(value: object) -> bool:
    return isinstance(value, str) and bool(_SLUG.match(value)) and "--" not in value


def is_mcp_slug(value: object) -> bool:
    return isinstance(value, str) and bool(_MCP_SLUG.match(value)) and "__" not in value


@dataclass(frozen=True)
class SkillMeta:
    """What a ``SKILL.md`` says: its front matter, read and checked, and its body."""

    name: str
    description: str
    body: str
    front_matter: dict[str, Any]
    skills: tuple[str, ...] = ()
    tools: tuple[str, ...] = ()
    mcps: tuple[str, ...] = ()


@dataclass(frozen=True)
class SkillBundle:
    """A skill's files (relative POSIX path → bytes), its metadata and its digest."""

    meta: SkillMeta
    files: Mapping[str, bytes] = field(repr=False)
    sha256: str = ""

    @property
    def bytes(self) -> int:
        return sum(len(data) for data in self.files.values())


def canonical_digest(files: Mapping[str, bytes]) -> str:
    """sha256 (hex) of a file set, as ``yuxi.skill_digest`` computes it."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda p: p.encode()):
        data = files[path]
        digest.update(digest_header(path, len(data)))
        digest.update(data)
    return digest.hexdigest()


def digest_header(path: str, size: int) -> bytes:
    """What precedes a file's bytes in the canonical digest (a reader streaming the
    files feeds this, then the bytes, file by file in bytewise path order)."""
    return path.encode() + b"\0" + str(size).encode() + b"\0"


def _names(value: object, key: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split()
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SkillFormatError(f"{key} must be a list of names")
    return tuple(dict.fromkeys(value))


def parse_skill_md(text: str) -> SkillMeta:
    """The front matter and body of a ``SKILL.md``; SkillFormatError when malformed."""
    match = _FRONT.match(text.lstrip("\ufeff"))
    if match is None:
        raise SkillFormatError("SKILL.md must start with YAML front matter between --- lines")
    try:
        front = load_front_matter(match.group(1))
    except FrontMatterError as error:
        raise SkillFormatError(str(error)) from None
    if not isinstance(front, dict):
        raise SkillFormatError("the front matter of SKILL.md must be a mapping")
    name = front.get("name")
    if not is_skill_slug(name):
        raise SkillFormatError(
            "the front matter's name must be 1 to 64 lowercase letters, digits and single"
            " hyphens, not at either end"
        )
    description = front.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFormatError("the front matter needs a description")
    if len(description) > DESCRIPTION_LIMIT:
        raise SkillFormatError(f"the description is at most {DESCRIPTION_LIMIT} characters")
    metadata = front.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise SkillFormatError("metadata must be a mapping")
    deps = front.get("dependencies") or {}
    if not isinstance(deps, dict):
        raise SkillFormatError("dependencies must be a mapping of skills, tools and mcps")
    unknown = set(deps) - {"skills", "tools", "mcps"}
    if unknown:
        raise SkillFormatError(f"unknown dependencies {sorted(unknown)}: use skills, tools, mcps")
    skills = _names(deps.get("skills"), "dependencies.skills")
    tools = _names(front.get("allowed-tools"), "allowed-tools") + _names(
        deps.get("tools"), "dependencies.tools"
    )
    mcps = _names(deps.get("mcps"), "dependencies.mcps")
    bad = [s for s in skills if not is_skill_slug(s)] + [m for m in mcps if not is_mcp_slug(m)]
    if bad:
        raise SkillFormatError(f"invalid dependency names: {', '.join(bad)}")
    if name in skills:
        raise SkillFormatError(f"skill {name} cannot depend on itself")
    return SkillMeta(
        name=str(name),
        description=description.strip(),
        body=text[match.end() :].strip(),
        front_matter=_jsonable(front),  # dates and the like become text
        skills=skills,
        tools=tuple(dict.fromkeys(tools)),
        mcps=mcps,
    )


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def bundle(files: Mapping[str, bytes]) -> SkillBundle:
    """A skill from its files (paths already confined); SkillFormatError when it has no
    readable ``SKILL.md``."""
    if len(files) > MAX_FILES:
        raise SkillFormatError(f"a skill has at most {MAX_FILES} files")
    if sum(len(d) for d in files.values()) > MAX_BYTES:
        raise SkillFormatError(f"a skill holds at most {MAX_BYTES} bytes")
    _check_tree(files)
    raw = files.get(SKILL_FILE)
    if raw is None:
        raise SkillFormatError("a skill needs a SKILL.md at its top")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError("SKILL.md is not UTF-8 text") from None
    return SkillBundle(parse_skill_md(text), dict(files), canonical_digest(files))


def _check_tree(files: Mapping[str, bytes]) -> None:
    # "a" and "a/b" cannot both be written out (a worker copies a skill to its disk)
    for name in files:
        parent = name.rpartition("/")[0]
        while parent:
            if parent in files:
                raise SkillFormatError(f"{parent} is both a file and a directory in the skill")
            parent = parent.rpartition("/")[0]


def check_relative(name: str) -> str:
    """``name`` as a confined relative POSIX path; SkillFormatError otherwise."""
    if "\x00" in name or "\\" in name or name.startswith("/") or re.match(r"^[A-Za-z]:", name):
        raise SkillFormatError(f"{name!r}: skill paths are relative, /-separated")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise SkillFormatError(f"{name!r}: a skill path cannot name '..'")
    if len(name.encode()) > 1024:
        raise SkillFormatError(f"{name[:40]!r}...: a skill path is at most 1024 bytes")
    return str(PurePosixPath(*parts))


def read_directory(root: Path) -> dict[str, bytes]:
    """Every regular file under ``root`` by relative path. Symbolic links (files or
    directories) are refused, so nothing outside ``root`` is read; ``.git`` and other
    dot-directories are skipped."""
    base = root.resolve()
    if not base.is_dir():
        raise SkillFormatError(f"{root} is not a directory")
    files: dict[str, bytes] = {}
    total = 0
    for directory, subdirs, names in os.walk(base, followlinks=False):
        current = Path(directory)
        for sub in list(subdirs):
            if sub.startswith(".") or (current / sub).is_symlink():
                if (current / sub).is_symlink():
                    raise SkillFormatError(f"{sub}: symbolic links are not allowed in a skill")
                subdirs.remove(sub)
        for name in sorted(names):
            path = current / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                raise SkillFormatError(f"{name}: symbolic links are not allowed in a skill")
            if not stat.S_ISREG(info.st_mode):
                continue
            total += info.st_size
            if total > MAX_BYTES or len(files) >= MAX_FILES:
                raise SkillFormatError(
                    f"a skill has at most {MAX_FILES} files and {MAX_BYTES} bytes"
                )
            files[check_relative(path.relative_to(base).as_posix())] = path.read_bytes()
    return files


def read_zip(data: bytes) -> dict[str, bytes]:
    """The files of a ZIP archive of a skill. A single top directory holding the
    ``SKILL.md`` is stripped. Absolute paths, ``..``, links, more than ``MAX_ENTRIES``
    members and archives inflating past ``MAX_BYTES`` (whatever their headers claim) are
    refused, as is any archive zipfile cannot read: SkillFormatError, always."""
    _check_directory_size(data)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except Exception as error:  # see _why
        raise SkillFormatError(f"not a ZIP archive ({_why(error)})") from None
    files: dict[str, bytes] = {}
    total = 0
    with archive:
        entries = archive.infolist()
        if len(entries) > MAX_ENTRIES:
            raise SkillFormatError(f"a skill archive has at most {MAX_ENTRIES} entries")
        members = [m for m in entries if not m.is_dir()]
        if len(members) > MAX_FILES:
            raise SkillFormatError(f"a skill has at most {MAX_FILES} files")
        for member in members:
            if stat.S_ISLNK(member.external_attr >> 16):
                raise SkillFormatError(f"{member.filename}: links are not allowed in a skill")
            name = check_relative(member.filename)
            if name.split("/")[0] == "__MACOSX":
                continue
            try:
                with archive.open(member) as handle:
                    content = handle.read(MAX_BYTES - total + 1)
            except Exception as error:  # see _why
                raise SkillFormatError(f"{name}: cannot be extracted ({_why(error)})") from None
            total += len(content)
            if total > MAX_BYTES:
                raise SkillFormatError(f"the archive inflates past {MAX_BYTES} bytes")
            if name in files:
                raise SkillFormatError(f"{name} appears twice in the archive")
            files[name] = content
    return _strip_top(files)


def _why(error: Exception) -> str:
    # zipfile and its decompressors, on a crafted archive, raise far more than
    # BadZipFile (measured on corrupted archives: ValueError for a negative seek,
    # NotImplementedError for a version, UnicodeDecodeError for a name, zlib.error,
    # lzma.LZMAError and EOFError for the data): whatever they raise, the archive is at
    # fault, and the caller hears that it is unreadable and why
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _check_directory_size(data: bytes) -> None:
    """Refuses an archive whose central directory is larger than ``MAX_DIRECTORY_BYTES``
    before zipfile reads it: it builds an object for every entry (a 17 MiB upload of
    empty directories is 190,000 of them, 90 MB and seconds of work) and only then can
    they be counted. The size is the one zipfile reads the directory by, from its own
    reading of the end record (a private function of zipfile's, there since Python 2.6;
    without it, the count after opening still refuses such an archive)."""
    end_record = getattr(zipfile, "_EndRecData", None)
    if end_record is None:
        return
    try:
        record = end_record(io.BytesIO(data))
    except Exception:
        return  # zipfile then says why it cannot open the archive
    if record and record[_END_RECORD_DIRECTORY_SIZE] > MAX_DIRECTORY_BYTES:
        raise SkillFormatError(
            f"a skill archive has at most {MAX_ENTRIES} entries"
            f" (its directory holds more than {MAX_DIRECTORY_BYTES} bytes)"
        )


def _strip_top(files: dict[str, bytes]) -> dict[str, bytes]:
    if SKILL_FILE in files:
        return files
    tops = {name.split("/", 1)[0] for name in files}
    if len(tops) == 1 and all("/" in name for name in files):
        top = tops.pop()
        return {name[len(top) + 1 :]: data for name, data in files.items()}
    return files


def read_source(source: Path) -> SkillBundle:
    """A skill from a directory or a ZIP archive on disk."""
    if source.is_dir():
        return bundle(read_directory(source))
    try:
        size = source.stat().st_size
        if size > MAX_BYTES:
            raise SkillFormatError(f"the archive is larger than {MAX_BYTES} bytes")
        data = source.read_bytes()
    except OSError as error:
        raise SkillFormatError(f"cannot read {source}: {error.strerror}") from None
    return bundle(read_zip(data))
