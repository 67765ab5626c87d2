# Debian 12's xsimd 8.1 export lists `xtl` as a link dependency without finding it: provide the
# real target when xtl-dev is installed, else an empty one, so linking xsimd never adds -lxtl.
if(NOT TARGET xtl)
  find_package(xtl QUIET)
  if(NOT TARGET xtl)
    add_library(xtl INTERFACE IMPORTED)
  endif()
endif()
