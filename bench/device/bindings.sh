# Sourced on the GPU machine after .gpu/enter.sh: builds the Python bindings (build-python/)
# against the packed core and puts them and bench/ on PYTHONPATH (about 15 s).
rm -rf build-python
if ! { cmake -S python -B build-python -G Ninja -DCMAKE_BUILD_TYPE=Release -DTESSERA_CORE=build \
         -DTESSERA_LLVM_LIBS=/tmp/tessera-root -Dpybind11_DIR="$(python3 -m pybind11 --cmakedir)" \
         > /tmp/bindings-cmake.log 2>&1 && cmake --build build-python > /tmp/bindings-build.log 2>&1 &&
       [ -d build-python/python/tessera ]; }; then
  echo "bindings.sh: the Python bindings did not build" >&2
  tail -20 /tmp/bindings-cmake.log /tmp/bindings-build.log >&2
fi
export PYTHONPATH=$PWD/build-python/python:$PWD/bench
