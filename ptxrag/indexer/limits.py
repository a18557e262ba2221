"""Size caps on manual inputs, shared by every loader (Markdown, HTML, PDF) and the downloader.

The real PTX ISA manuals are small: the 9.1 Markdown folder is 3.7 MB in 681 files (largest 32 KB), the 9.0
folder 7.1 MB (largest file 1 MB, a parent repeating its children), the largest section 29 KB of text. The caps
leave a wide margin and stop inputs that would take the index build to gigabytes of memory (a 50 MB section
took it to 7.3 GB). Each cap is a keyword argument with these defaults; a breach is a ``ManualTooLargeError``
naming the input, its size and the cap."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import ManualFormatError

MiB = 1 << 20
#: one manual file: the official single-page HTML or PDF
MAX_FILE_BYTES = 64 * MiB
#: one Markdown file of a folder (or a single Markdown manual)
MAX_MARKDOWN_FILE_BYTES = 16 * MiB
#: all Markdown files of a folder together, and how many there may be
MAX_FOLDER_BYTES = 256 * MiB
MAX_FOLDER_FILES = 20_000
#: a download is cut off (and refused) past this many bytes
MAX_DOWNLOAD_BYTES = 64 * MiB
#: the text of one section, as a loader produced it
MAX_SECTION_CHARS = 1 * MiB


class ManualTooLargeError(ManualFormatError):
    """A manual input (file, folder, download or section) is larger than its cap."""


def _mib(n: int) -> str:
    return f"{n / MiB:.1f} MiB"


def check_file_size(path: Path, limit: int = MAX_FILE_BYTES) -> int:
    """The size of ``path``; a ManualTooLargeError when it is over ``limit``. Call before reading it."""
    size = os.stat(path).st_size
    if size > limit:
        raise ManualTooLargeError(
            f"{path}: {_mib(size)}, over the {_mib(limit)} a manual file may have; is this the PTX manual?"
        )
    return size


def check_folder_size(files: list[Path], folder: Path, limit: int = MAX_FOLDER_BYTES) -> None:
    """Caps on a Markdown folder: the number of files, each file, and their total size."""
    if len(files) > MAX_FOLDER_FILES:
        raise ManualTooLargeError(
            f"{folder}: {len(files)} Markdown files, over the {MAX_FOLDER_FILES} a manual folder may have"
        )
    total = sum(check_file_size(f, MAX_MARKDOWN_FILE_BYTES) for f in files)
    if total > limit:
        raise ManualTooLargeError(
            f"{folder}: {_mib(total)} of Markdown, over the {_mib(limit)} a manual folder may have"
        )


def check_section_size(number: str, text: str, where: str, limit: int = MAX_SECTION_CHARS) -> None:
    """A section's text over ``limit`` characters: a broken conversion or not a manual."""
    if len(text) > limit:
        raise ManualTooLargeError(
            f"{where}: section {number} has {_mib(len(text))} of text, over the {_mib(limit)} a section may "
            "have (the largest real PTX section has about 30 KB)"
        )


class DownloadCap:
    """Counts downloaded bytes; raises once more than ``limit`` arrived (also when Content-Length says so)."""

    def __init__(self, url: str, limit: int = MAX_DOWNLOAD_BYTES) -> None:
        self.url, self.limit, self.received = url, limit, 0

    def announce(self, content_length: str | None) -> None:
        if content_length and content_length.isdigit() and int(content_length) > self.limit:
            raise ManualTooLargeError(
                f"{self.url}: the server announces {_mib(int(content_length))}, over the {_mib(self.limit)} "
                "a manual download may have; nothing was downloaded"
            )

    def add(self, n: int) -> None:
        self.received += n
        if self.received > self.limit:
            raise ManualTooLargeError(
                f"{self.url}: more than {_mib(self.limit)} received, the cap for a manual download; "
                "the download was stopped and nothing was kept"
            )
