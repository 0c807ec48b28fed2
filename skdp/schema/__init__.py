"""Public table schemas: declare a table's columns, labels and groups once."""

from ._schema import Categorical, Numeric, TableSchema, as_column

__all__ = ["Categorical", "Numeric", "TableSchema", "as_column"]
