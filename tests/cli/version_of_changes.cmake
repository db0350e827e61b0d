# `headlab --version` tells builds of different uncommitted edits apart (the
# Python module refuses a headlab program of another build by it): runs
# cmake/version_header.cmake on a scratch git checkout, clean, with a docs
# edit (the same line: the program is the same), and with two edits of a
# source file (two lines).
#   cmake -DSCRIPT=... -DWORK=<scratch folder> -P version_of_changes.cmake
find_package(Git REQUIRED QUIET)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}/src")
function(git)
  execute_process(COMMAND "${GIT_EXECUTABLE}" -C "${WORK}/src" -c user.name=t -c user.email=t@t ${ARGN}
    RESULT_VARIABLE failed OUTPUT_QUIET ERROR_VARIABLE said)
  if(failed)
    message(FATAL_ERROR "git ${ARGN} failed: ${said}")
  endif()
endfunction()
# The version line of the checkout as it is now, into `out`.
function(line out)
  execute_process(COMMAND "${CMAKE_COMMAND}" -DSOURCE_DIR=${WORK}/src -DOUTPUT=${WORK}/version.h -DVERSION=1.2.3
    -P "${SCRIPT}" RESULT_VARIABLE failed)
  if(failed)
    message(FATAL_ERROR "version_header.cmake failed: ${failed}")
  endif()
  file(READ "${WORK}/version.h" text)
  string(REGEX MATCH "\"headlab [^\"]*\"" found "${text}")
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

file(WRITE "${WORK}/src/a.cpp" "int a() { return 1; }\n")
file(WRITE "${WORK}/src/notes.md" "notes\n")
git(init -q)
git(add a.cpp notes.md)
git(commit -q -m one)
line(clean)
if(NOT clean MATCHES "^\"headlab 1\\.2\\.3 \\(git [0-9a-f]+\\)\"$")
  message(FATAL_ERROR "a clean checkout: expected \"headlab 1.2.3 (git <commit>)\", got ${clean}")
endif()
file(WRITE "${WORK}/src/notes.md" "notes, edited\n")
line(docs)
if(NOT docs STREQUAL clean)
  message(FATAL_ERROR "an edit of no compiled file changed the line: ${clean} -> ${docs}")
endif()
file(WRITE "${WORK}/src/a.cpp" "int a() { return 2; }\n")
line(first)
file(WRITE "${WORK}/src/a.cpp" "int a() { return 3; }\n")
line(second)
foreach(edited first second)
  if(NOT ${edited} MATCHES "^\"headlab 1\\.2\\.3 \\(git [0-9a-f]+-dirty, changes [0-9a-f]+\\)\"$")
    message(FATAL_ERROR "an edited source: expected \"headlab 1.2.3 (git <commit>-dirty, changes <hash>)\", got ${${edited}}")
  endif()
endforeach()
if(first STREQUAL second)
  message(FATAL_ERROR "two different edits gave one line: ${first}")
endif()
