# Compiler flags shared by every eggroll target, and the optional parts (CUDA, MPI, Python).

# Contract 1 (DESIGN.md): results must not depend on contraction or fast-math choices.
set(EGGROLL_CXX_FLAGS -ffp-contract=off -fno-fast-math -Wall -Wextra -Wno-unused-parameter)
# GCC 12 reports a false -Wrestrict inside std::string concatenation (GCC PR 105329).
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  list(APPEND EGGROLL_CXX_FLAGS -Wno-restrict)
endif()
if(EGGROLL_NATIVE)
  list(APPEND EGGROLL_CXX_FLAGS -march=native)
endif()

if(EGGROLL_SANITIZE)
  string(REPLACE "," ";" _san_list "${EGGROLL_SANITIZE}")
  foreach(_san ${_san_list})
    if(NOT _san MATCHES "^(address|undefined)$")
      message(FATAL_ERROR "EGGROLL_SANITIZE: '${_san}' is not one of address, undefined")
    endif()
  endforeach()
  set(_san_flags -fsanitize=${EGGROLL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_compile_options(${_san_flags})
  add_link_options(${_san_flags})
endif()

# Optional parts: AUTO enables a part only where its toolchain is found; the parts are empty for
# now, so finding them only records the fact (eggroll info reports it).
set(EGGROLL_HAVE_CUDA OFF)
if(NOT EGGROLL_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(EGGROLL_HAVE_CUDA ON)
  elseif(EGGROLL_CUDA STREQUAL "ON")
    message(FATAL_ERROR "EGGROLL_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or use AUTO)")
  endif()
endif()

set(EGGROLL_HAVE_MPI OFF)
if(NOT EGGROLL_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(EGGROLL_HAVE_MPI ON)
  elseif(EGGROLL_MPI STREQUAL "ON")
    message(FATAL_ERROR "EGGROLL_MPI=ON but MPI was not found (apt-get install libopenmpi-dev openmpi-bin)")
  endif()
endif()

set(EGGROLL_HAVE_PYTHON OFF)
if(NOT EGGROLL_PYTHON STREQUAL "OFF")
  # The module is for the system's Python (Debian's python3 with python3-numpy); pinning it keeps
  # pybind11's interpreter search away from version-manager shims that name missing versions.
  if(NOT DEFINED PYTHON_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(PYTHON_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(pybind11 CONFIG QUIET)
  if(pybind11_FOUND)
    set(EGGROLL_HAVE_PYTHON ON)
  elseif(EGGROLL_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "EGGROLL_PYTHON=ON but pybind11 was not found (apt-get install pybind11-dev)")
  endif()
endif()
message(STATUS "eggroll: CUDA=${EGGROLL_HAVE_CUDA} MPI=${EGGROLL_HAVE_MPI} Python=${EGGROLL_HAVE_PYTHON} (the CUDA, MPI and Python parts are not built yet)")
