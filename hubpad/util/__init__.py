"""Small rules and helpers every layer uses: refs (local path or repo id), hashing, sizes, redaction, logging."""

from .hashing import digest_of, file_sha256
from .log import log
from .redact import redact
from .refs import derive_target, is_local, is_repo_id, validate_repo_id
from .sizes import format_size, human, parse_size

__all__ = ["derive_target", "digest_of", "file_sha256", "format_size", "human", "is_local", "is_repo_id", "log",
           "parse_size", "redact", "validate_repo_id"]
