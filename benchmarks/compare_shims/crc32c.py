"""A stand-in for the `crc32c` package, which Ray Data's TFRecord writer imports.

Ray Data's `write_tfrecords` needs `crc32c.crc32(data)`; seqline installs google-crc32c
(the same CRC-32C, also in C) instead. compare.py puts this folder on the Ray peer's
PYTHONPATH only when `crc32c` itself is not installed.
"""

import google_crc32c


def crc32c(data: bytes, value: int = 0) -> int:
    return google_crc32c.extend(value, data)


crc32 = crc32c
