"""Reading a user's table: a CSV in any common encoding and delimiter, a Parquet file, or a DataFrame.

A source is a path, raw ``bytes``, a file-like object (binary or text) or a DataFrame. Before any
parsing, :func:`read_frame` looks at the first bytes: an empty file, a binary file renamed ``.csv``
(a spreadsheet, an archive, an image) and a header row with more than :data:`MAX_COLUMNS` fields
are refused with what was found, at a cost bounded by the header's length, never by the number of
columns times rows. The text encoding is read from a byte-order mark (UTF-8, UTF-16, UTF-32), from
the zero bytes of BOM-less UTF-16, or else is UTF-8 when the bytes decode as UTF-8 and Windows-1252
(Latin-1 with curly quotes, what spreadsheets export in Western Europe) when they do not.
"""

from __future__ import annotations

import codecs
import csv
import io
import os
import re
import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd

#: Most columns a table may have: the column report, the per-column decisions and the page's table
#: are linear in it, and a kernel method on thousands of raw columns needs feature selection first.
MAX_COLUMNS = 2_000
#: Delimiters :func:`detect_format` chooses from, with the names messages use.
DELIMITERS = {",": "comma", ";": "semicolon", "\t": "tab", "|": "vertical bar"}
#: Cells read as missing besides pandas' own markers (empty, NA, N/A, NaN, null, None, ...).
MISSING_MARKERS = ("?", "-", "--", ".", "n.a.", "missing")
#: How much of a file :func:`detect_format` and the binary check look at.
SAMPLE_BYTES, SAMPLE_LINES = 1 << 16, 50
PARQUET_MAGIC = b"PAR1"
GZIP_MAGIC = b"\x1f\x8b"
#: Most bytes a gzip-compressed table may expand to (a small file can hold gigabytes of zeros).
MAX_GZIP_BYTES = 1 << 29
#: Leading bytes of files that are not text, with what they are (for the message).
BINARY_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (an Excel .xlsx or OpenDocument .ods workbook is one)",
    b"\xd0\xcf\x11\xe0": "an old Excel .xls workbook",
    b"%PDF": "a PDF document",
    b"\x89PNG": "a PNG image",
    b"\xff\xd8\xff": "a JPEG image",
    b"SQLite format 3": "an SQLite database",
    b"\x93NUMPY": "a NumPy .npy array",
}
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)
#: How messages name an encoding.
ENCODING_NAMES = {
    "utf-8": "UTF-8",
    "utf-8-sig": "UTF-8",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16",
    "utf-16-be": "UTF-16",
    "utf-32": "UTF-32",
    "cp1252": "Windows-1252 (Latin-1)",
    "latin-1": "Latin-1",
}
_COMMA_DECIMAL = re.compile(r"^\s*[-+]?\d+,\d+(?:[eE][-+]?\d+)?\s*$")
_POINT_DECIMAL = re.compile(r"^\s*[-+]?\d*\.\d+(?:[eE][-+]?\d+)?\s*$")
#: Numbers grouped in thousands: 1,234 or 1,234,567.5 (comma groups), 1.234.567 or 1.234,5 (point groups).
_COMMA_GROUPS = re.compile(r"^\s*[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?\s*$")
_POINT_GROUPS = re.compile(r"^\s*[-+]?\d{1,3}(?:(?:\.\d{3}){2,}(?:,\d+)?|\.\d{3}(?:\.\d{3})*,\d+)\s*$")


@dataclass(frozen=True)
class CsvFormat:
    """How a table file is written: CSV with its field delimiter, decimal mark and text encoding,
    or Parquet (``kind="parquet"``)."""

    delimiter: str = ","
    decimal: str = "."
    encoding: str = "utf-8"
    kind: str = "csv"
    #: The thousands separator of its numbers ("" for none): "1,234" or "1.234.567".
    thousands: str = ""

    def describe(self) -> str:
        """E.g. "semicolon-separated, decimal comma" (the encoding is named when it is not UTF-8)."""
        if self.kind == "parquet":
            return "Parquet"
        text = f"{DELIMITERS.get(self.delimiter, repr(self.delimiter))}-separated"
        text += ", decimal comma" if self.decimal == "," else ""
        text += f", thousands separated by {'commas' if self.thousands == ',' else 'points'}" if self.thousands else ""
        name = ENCODING_NAMES.get(self.encoding, self.encoding)
        return text + ("" if name == "UTF-8" else f", {name}")

    @property
    def plain(self) -> bool:
        """A comma-separated UTF-8 CSV with decimal points (nothing worth a note)."""
        return (
            self.kind == "csv"
            and self.delimiter == ","
            and self.decimal == "."
            and not self.thousands
            and ENCODING_NAMES.get(self.encoding) == "UTF-8"
        )


def detect_format(text: str) -> CsvFormat:
    """The delimiter whose split gives the same number (≥ 2) of fields on the most of the first
    :data:`SAMPLE_LINES` lines (then the most fields), and a decimal comma when the delimiter is
    not a comma and the data cells hold numbers like ``1,5`` but none like ``1.5``."""
    lines = [line for line in text.splitlines()[: SAMPLE_LINES + 1] if line.strip()]
    best, best_score = ",", (0.0, 1)
    for delimiter in DELIMITERS:
        counts = [len(row) for row in csv.reader(lines, delimiter=delimiter)]
        if not counts or counts[0] < 2:
            continue
        score = (sum(count == counts[0] for count in counts) / len(counts), counts[0])
        if score > best_score:
            best, best_score = delimiter, score
    decimal, thousands = ".", ""
    cells = [cell for row in csv.reader(lines[1:], delimiter=best) for cell in row]
    if best != ",":
        if any(_POINT_GROUPS.match(c) for c in cells):
            decimal, thousands = ",", "."  # 1.234.567 or 1.234,5: points group, a comma decimal
        elif any(_COMMA_DECIMAL.match(c) for c in cells) and not any(_POINT_DECIMAL.match(c) for c in cells):
            decimal = ","
        elif any(_COMMA_GROUPS.match(c) for c in cells):
            thousands = ","
    elif any(_COMMA_GROUPS.match(c) for c in cells):
        thousands = ","  # "1,234" quoted in a comma-separated file
    return CsvFormat(best, decimal, thousands=thousands)


def read_bytes(source) -> bytes:
    """The bytes of a path, ``bytes``-like object or file-like object (text is encoded as UTF-8)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return bytes(source)
    if isinstance(source, (str, os.PathLike)):
        if not os.path.exists(source):
            raise ValueError(f"source: no such file {os.fspath(source)!r}")
        with open(source, "rb") as fh:
            return fh.read()
    if not hasattr(source, "read"):
        raise TypeError(f"source must be a path, bytes, a file-like object or a DataFrame, got {type(source).__name__}")
    if hasattr(source, "seek"):
        source.seek(0)
    data = source.read()
    return data.encode("utf-8") if isinstance(data, str) else data


def detect_encoding(head: bytes) -> str:
    """The encoding of a text file from its first bytes (see the module docstring); the caller
    falls back to Windows-1252 when UTF-8 fails later in the file."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    even, odd = head[0::2], head[1::2]
    if head and odd.count(0) > 0.4 * len(odd) and even.count(0) < 0.1 * len(even):
        return "utf-16-le"
    if head and even.count(0) > 0.4 * len(even) and odd.count(0) < 0.1 * len(odd):
        return "utf-16-be"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.start < len(head) - 3:  # not just a character cut at the sample's end
            return _single_byte(head)
    return "utf-8"


def _single_byte(data: bytes) -> str:
    try:
        data.decode("cp1252")
        return "cp1252"
    except UnicodeDecodeError:  # bytes cp1252 leaves undefined (0x81, 0x8d, ...)
        return "latin-1"


def sniff(data: bytes) -> str:
    """ "parquet" or the encoding of a CSV; raises ValueError for an empty or a binary file."""
    if not data.strip():
        raise ValueError(f"source: the file is empty ({len(data):,} bytes{', all blank' if data else ''})")
    if data.startswith(PARQUET_MAGIC):
        return "parquet"
    for magic, what in BINARY_MAGIC.items():
        if data.startswith(magic):
            raise ValueError(
                f"source: this is not a text table but {what}; export it as CSV (or Parquet) and upload that"
            )
    encoding = detect_encoding(data[:SAMPLE_BYTES])
    head = data[:SAMPLE_BYTES].decode(encoding, errors="replace").lstrip("\ufeff \t\r\n")
    if head[:1] in ("{", "[") and re.match(r'^[\[{]\s*("|\{|\[|\]|\}|\d|-|true|false|null)', head):
        raise ValueError(
            "source: this is JSON, not a table (it opens with a JSON object or array); convert it to CSV "
            "(pandas: pd.read_json(path).to_csv(out, index=False)) or Parquet and upload that"
        )
    if not encoding.startswith(("utf-16", "utf-32")) and b"\x00" in data[:SAMPLE_BYTES]:
        raise ValueError(
            "source: this is a binary file, not a CSV (it holds zero bytes, which text never "
            "does); export the table as CSV (or Parquet) and upload that"
        )
    return encoding


def _header_fields(data: bytes, encoding: str, delimiter: str) -> int:
    """Fields of the header row, decoding only up to its end (cost linear in the header's length)."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    header = ""
    for start in range(0, len(data), SAMPLE_BYTES):
        header += decoder.decode(data[start : start + SAMPLE_BYTES])
        if "\n" in header:
            break
    header = header.lstrip("\ufeff").split("\n", 1)[0]
    return len(next(csv.reader([header], delimiter=delimiter), []))


def _too_wide(columns: int, rows: str = "") -> ValueError:
    return ValueError(
        f"source: the table has {columns:,} columns{rows}; at most {MAX_COLUMNS:,} can be used "
        "here (the column report and a kernel on thousands of raw columns would take minutes): "
        "keep the columns you need and upload that"
    )


def _read_parquet(data: bytes) -> tuple[pd.DataFrame, CsvFormat]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise ImportError("reading Parquet needs pyarrow: pip install pyarrow") from None
    try:
        handle = pq.ParquetFile(io.BytesIO(data))
        columns, rows = handle.metadata.num_columns, handle.metadata.num_rows
        frame = None if columns > MAX_COLUMNS else handle.read().to_pandas()
    except Exception as exc:  # pyarrow's own errors: a damaged or truncated file
        raise ValueError(f"source: could not read the Parquet file ({exc})") from None
    if frame is None:
        raise _too_wide(columns, f" and {rows:,} rows")
    return frame, CsvFormat(kind="parquet")


def read_csv_bytes(data: bytes, fmt: CsvFormat | None = None) -> tuple[pd.DataFrame, CsvFormat]:
    """Parse table bytes: Parquet, or a CSV with ``fmt`` (detected when None; see the module
    docstring). Refuses an empty, binary or too-wide file before parsing it."""
    data = _line_ends(_gunzip(data))
    if fmt is None:
        kind = sniff(data)
        if kind == "parquet":
            return _read_parquet(data)
        fmt = detect_format(data[:SAMPLE_BYTES].decode(kind, errors="replace").lstrip("\ufeff"))
        fmt = CsvFormat(fmt.delimiter, fmt.decimal, kind, thousands=fmt.thousands)
    columns = _header_fields(data, fmt.encoding, fmt.delimiter)
    if columns > MAX_COLUMNS:
        raise _too_wide(columns)
    try:
        frame = _parse(data, fmt)
    except UnicodeDecodeError:
        if fmt.encoding != "utf-8":
            raise ValueError(
                f"source: the file is not valid {ENCODING_NAMES.get(fmt.encoding, fmt.encoding)} "
                "text; save it as UTF-8 CSV and upload it again"
            ) from None
        # valid UTF-8 in the first bytes only: a single-byte export after all
        fmt = CsvFormat(fmt.delimiter, fmt.decimal, _single_byte(data), thousands=fmt.thousands)
        frame = _parse(data, fmt)
    return frame, fmt


def _gunzip(data: bytes) -> bytes:
    """A gzip-compressed table (``.csv.gz``) decompressed, up to :data:`MAX_GZIP_BYTES`."""
    if not data.startswith(GZIP_MAGIC):
        return data
    inflater = zlib.decompressobj(wbits=31)
    try:
        out = inflater.decompress(data, MAX_GZIP_BYTES)
    except zlib.error as exc:
        raise ValueError(
            f"source: the gzip-compressed file is damaged ({exc}); compress it again or upload the CSV itself"
        ) from None
    if not inflater.eof and not inflater.unconsumed_tail:
        raise ValueError(
            "source: the gzip-compressed file is truncated or damaged (its stream does not end); "
            "compress it again or upload the CSV itself"
        )
    if inflater.unconsumed_tail:
        raise ValueError(
            f"source: the gzip-compressed file expands to more than {MAX_GZIP_BYTES >> 20:,} MiB; "
            f"upload a smaller table"
        )
    return out


def _line_ends(data: bytes) -> bytes:
    """Lines ended by CR alone (old Mac exports) as LF: the CSV parser knows only LF and CRLF."""
    if b"\r" in data[:SAMPLE_BYTES] and b"\n" not in data:
        return data.replace(b"\r", b"\n")
    return data


def _parse(data: bytes, fmt: CsvFormat) -> pd.DataFrame:
    try:
        return pd.read_csv(
            io.BytesIO(data),
            sep=fmt.delimiter,
            decimal=fmt.decimal,
            encoding=fmt.encoding,
            thousands=fmt.thousands or None,
            na_values=list(MISSING_MARKERS),
            skipinitialspace=True,
            low_memory=False,
        )
    except pd.errors.EmptyDataError:
        raise ValueError("source: the CSV is empty (no header and no rows)") from None
    except pd.errors.ParserError as exc:
        raise ValueError(f"source: could not parse the CSV as {fmt.describe()} ({exc})") from None


def read_frame(source) -> tuple[pd.DataFrame, CsvFormat | None]:
    """A DataFrame (copied; format None) or a table read by :func:`read_csv_bytes`, with string
    column names. Object columns whose every non-missing cell is a number (e.g. a pandas column
    holding ``pd.NA``) become numeric."""
    if isinstance(source, pd.DataFrame):
        frame, fmt = source.copy(), None
        if frame.shape[1] > MAX_COLUMNS:
            raise _too_wide(frame.shape[1])
    else:
        frame, fmt = read_csv_bytes(read_bytes(source))
    frame.columns = [str(c) for c in frame.columns]
    repeated = sorted(set(frame.columns[frame.columns.duplicated()]))
    if repeated:
        raise ValueError(f"source: the table names more than one column {repeated}; give each column its own name")
    for name in frame.columns:
        column = frame[name]
        if is_numeric(column) or not column.notna().any():
            continue
        converted = pd.to_numeric(column, errors="coerce")
        if converted.notna().sum() == column.notna().sum():
            frame[name] = converted.astype(np.float64)
    return frame, fmt


def is_numeric(column: pd.Series) -> bool:
    return pd.api.types.is_numeric_dtype(column) or pd.api.types.is_bool_dtype(column)


def source_label(source) -> str:
    """How notes and titles name a source: its path, a file object's name, or what it is."""
    if isinstance(source, pd.DataFrame):
        return "DataFrame"
    if isinstance(source, (bytes, bytearray, memoryview)):
        return "bytes"
    if isinstance(source, (str, os.PathLike)):
        return os.fspath(source)
    return getattr(source, "name", None) or "uploaded table"
