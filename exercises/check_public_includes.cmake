# Note [Exercises use the public API]
# A learner writes the exercises against ember as installed, so their files may include only what
# `cmake --install` installs (cmake/install.cmake: the headers under EMBER_HEADER_DIRS, less those
# under EMBER_PRIVATE_HEADER_DIRS, and ember/ember.h; cuda/'s headers count as installed, as the
# .cu files compile only in CUDA builds, which install them), system headers and the exercises'
# own headers. exercises/CMakeLists.txt runs this script before it builds the exercise files, and
# again whenever one of them changes, over the headers, the stubs and the solutions (not the
# tests, which may use tests/test_helpers.h). A refused include fails the build, naming the file.
#   cmake -DSOURCE_DIR=<ember> -DPUBLIC_DIRS="core;nn;..." -DPRIVATE_DIRS=core/cpu -DFILES="a.h;b.cpp" -P this
list(JOIN PUBLIC_DIRS "|" public)
list(JOIN PRIVATE_DIRS "|" private)
foreach(file ${FILES})
  get_filename_component(own_dir ${file} DIRECTORY)
  file(STRINGS ${file} includes REGEX "^#include [<\"]")
  foreach(line ${includes})
    string(REGEX REPLACE "^#include [<\"]([^>\"]+)[>\"].*" "\\1" header "${line}")
    string(REGEX MATCH "^[^/]+" first "${header}")
    if(line MATCHES "^#include \"" AND header MATCHES "^[^/]+\\.h$"
       AND (EXISTS ${own_dir}/${header} OR EXISTS ${own_dir}/../${header}))
      continue()  # an exercise header (a solution includes the one a level up)
    elseif(header STREQUAL "ember/ember.h")
      continue()
    elseif(header MATCHES "^(${public})/.*\\.h$" AND NOT header MATCHES "^(${private})/" AND EXISTS ${SOURCE_DIR}/${header})
      continue()
    elseif(line MATCHES "^#include <" AND NOT IS_DIRECTORY ${SOURCE_DIR}/${first})
      continue()  # a standard or system header, not one of ember's folders
    endif()
    message(FATAL_ERROR "${file}: '${line}' is not part of ember's installed API (Note [Exercises use the public API] "
                        "in exercises/check_public_includes.cmake)")
  endforeach()
endforeach()
