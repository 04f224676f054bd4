# pyarrow.compute makes most of its functions at import time, one per kernel of Arrow's C++ function registry
# (`_make_global_functions`), so no static tool can see them in its source. This partial stub (py.typed says
# `partial`: every other pyarrow module is read from pyarrow itself) types every name of the module as Any.
from typing import Any

def __getattr__(name: str) -> Any: ...
