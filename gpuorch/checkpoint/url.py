"""``StoreUrl``: a checkpoint store URL, parsed once (spec validation, ``open_store``, placement,
doctor and the stores themselves all read this value instead of splitting the string again).

Stdlib only (Python 3.8+): shipped to instances with the agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class StoreUrl:
    """``scheme://bucket[@account]/prefix`` (or ``file:///abs/path``), split into its parts.

    ``parse`` is lenient: it only needs a scheme. Each store says which shape it accepts
    (``bucket_only``, or its own checks on ``host``/``path``), so its error can name its form.
    """

    scheme: str  # lower-case
    bucket: str  # the bucket or container: the authority before any "@" ("" for file:///)
    account: str  # after "@" in the authority (az://container@account), lower-case; else ""
    prefix: str  # the key prefix: the path without its outer slashes
    raw: str  # the URL as written
    path: str = ""  # the path, unquoted (a file:// store's root)
    host: str = ""  # the whole authority, as written (file:// accepts only "" or localhost)
    extras: bool = False  # a query, fragment or password: no store reads those

    @classmethod
    def parse(cls, raw: str) -> StoreUrl:
        """Split ``raw``; ValueError (naming the form) for a string without ``scheme://``."""
        scheme, sep, _ = str(raw).partition("://")  # the one place a store URL is split
        if not sep or not scheme:
            raise ValueError(f"cannot read checkpoint store URL {raw!r}; write scheme://bucket/prefix "
                             "(file:///abs/path, s3://bucket/prefix, ...)")
        parts = urlsplit(raw)
        scheme = scheme.lower()
        netloc = parts.netloc
        bucket, at, account = netloc.partition("@")
        extras = bool(parts.query or parts.fragment or (at and ":" in bucket))  # user:password@
        return cls(scheme=scheme, bucket=bucket, account=account.lower() if at else "",
                   prefix=parts.path.strip("/"), raw=raw, path=unquote(parts.path), host=netloc,
                   extras=extras)

    def bucket_only(self, form: str) -> str:
        """The bucket, for a store whose URLs are exactly ``scheme://bucket/prefix``; ValueError
        naming ``form`` when the bucket is missing or the URL carries an account or a query."""
        if not self.bucket or self.account or "@" in self.host or self.extras:
            raise ValueError(f"cannot read store URL {self.raw!r}; write {form}")
        return self.bucket

    def __str__(self) -> str:
        return self.raw


def store_url(url: str | StoreUrl) -> StoreUrl:
    """``url`` as a ``StoreUrl`` (parsed if it is still a string)."""
    return url if isinstance(url, StoreUrl) else StoreUrl.parse(url)
