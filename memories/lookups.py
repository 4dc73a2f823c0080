"""`field__like`: SQL LIKE with a pattern already escaped by the caller (memories.selectors.like_escape).

A caller's glob becomes a LIKE pattern, never a regular expression: PostgreSQL matches LIKE scanning
forward and backing up only to the latest `%` (runs of `%` count as one), so a pattern costs at most its
length times the text's, while the regular expression `*` used to become (`.*` per star) went polynomial in
the number of stars: 500 of them held a request for seconds (bench/hostile_patterns.py).
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Lookup


@models.TextField.register_lookup
@models.CharField.register_lookup
class Like(Lookup):
    lookup_name = "like"

    def as_sql(self, compiler: Any, connection: Any) -> Any:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        rhs, rhs_params = self.process_rhs(compiler, connection)
        return f"{lhs} LIKE {rhs}", (*lhs_params, *rhs_params)
