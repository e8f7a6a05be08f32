"""Tests tune into a database of their own (unless TESSERA_TUNING_DB names one): their picks,
for small shapes and often timed beside other test processes, must not serve the user's work
from tuning.json."""
import os

import tessera

os.environ.setdefault("TESSERA_TUNING_DB", os.path.join(tessera.cache_dir(), "tuning-tests.json"))
