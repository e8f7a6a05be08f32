# cmake -DROOT=<compiler dir> -DOUT=<header> -P HashSources.cmake: writes OUT defining
# TESSERA_COMPILER_HASH, the first 16 hex digits of a SHA-256 over the compiler's sources (their
# paths below ROOT and contents), rewritten only when it changes.
file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/*.h ${ROOT}/*.td ${ROOT}/*.cpp)
list(SORT sources)
set(all "")
foreach(source ${sources})
  file(SHA256 ${ROOT}/${source} hash)
  string(APPEND all "${source}:${hash}\n")
endforeach()
string(SHA256 total "${all}")
string(SUBSTRING ${total} 0 16 short)
file(WRITE ${OUT}.new "#define TESSERA_COMPILER_HASH \"${short}\"\n")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT}.new ${OUT})
file(REMOVE ${OUT}.new)
