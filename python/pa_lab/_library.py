"""Finding and loading the compiled ops (libpa_lab_torch.so).

Where it is looked for, first match wins:
  1. the path in the environment variable PA_LAB_LIBRARY;
  2. python/ of a CMake build folder of this checkout whose name starts with
     "build" (build/, build-release/, ...), newest first.

load() first puts the already loaded C++ runtime, libstdc++, into the
process's global symbol scope. Without that the library crashes on the GPU
machine inside std::ostringstream (the first time a plan is described),
and with it, or with libstdc++ preloaded, it does not. The library carries
copies of libstdc++'s template statics (nm lists the locale facets' ids
among its unique symbols); the likely cause is its references binding to
those copies instead of the runtime's while the runtime sits in an earlier
module's private scope.
"""
import ctypes
import glob
import os

import torch

_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def library_path() -> str:
    env = os.environ.get("PA_LAB_LIBRARY")
    if env:
        if not os.path.isfile(env):
            raise FileNotFoundError(f"PA_LAB_LIBRARY={env}: no such file")
        return env
    found = glob.glob(os.path.join(_REPO, "build*", "python", "libpa_lab_torch.so"))
    if not found:
        raise FileNotFoundError(
            "libpa_lab_torch.so not found: build the lab with CMake on a machine with PyTorch "
            "(cmake -S . -B build && cmake --build build --target pa_lab_torch), "
            "or set PA_LAB_LIBRARY to the library's path")
    return max(found, key=os.path.getmtime)


def load() -> str:
    path = library_path()
    ctypes.CDLL("libstdc++.so.6", mode=os.RTLD_GLOBAL)  # already loaded: made global
    torch.ops.load_library(path)
    return path
