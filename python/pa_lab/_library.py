"""Finding and loading the compiled ops (libpa_lab_torch.so).

Where it is looked for, first match wins:
  1. the path in the environment variable PA_LAB_LIBRARY;
  2. python/ of a CMake build folder of this checkout whose name starts with
     "build" (build/, build-release/, ...), newest first.

The C++ runtime goes into the process's global symbol scope first (load()).
Without that, on the GPU machine, the library crashed inside
std::ostringstream the first time a plan was described, and preloading
libstdc++ (LD_PRELOAD) or this line cured it: the library carries its own
copies of libstdc++'s template statics (nm lists the locale facets' ids
among its unique symbols), and with the runtime loaded privately by an
earlier module its references bound to those copies instead of the
runtime's, two copies of one object.
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
