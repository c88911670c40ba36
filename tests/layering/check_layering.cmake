# Fails when a source file includes something its layer must never use (docs/ARCHITECTURE.md).
#   core/     : no Qt, no LibTorch/ATen/c10, no CUDA/CUPTI/NCCL, no ui/ or profiler/ headers
#   ui/       : no LibTorch, no CUDA, no profiler/ headers
#   profiler/ : no Qt Widgets, no ui/ headers
# and checks the GUI executable's link line does not mention libtorch/c10.
set(violations "")

function(check_dir dir pattern why)
  file(GLOB_RECURSE files "${SOURCE_DIR}/${dir}/*.h" "${SOURCE_DIR}/${dir}/*.hpp" "${SOURCE_DIR}/${dir}/*.cpp"
       "${SOURCE_DIR}/${dir}/*.cc" "${SOURCE_DIR}/${dir}/*.cu")
  foreach(f ${files})
    file(STRINGS "${f}" lines REGEX "^[ \t]*#[ \t]*include")
    foreach(line ${lines})
      if(line MATCHES "${pattern}")
        file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
        list(APPEND violations "${rel}: ${line}  (${why})")
      endif()
    endforeach()
  endforeach()
  set(violations "${violations}" PARENT_SCOPE)
endfunction()

check_dir(core "[<\"](Q[A-Za-z]+|Qt[A-Za-z]*/|torch/|ATen/|c10/|cuda|cupti|nccl|ui/|profiler/|qcustomplot)" "core may use only the standard library, SQLite, zlib, LZ4 and ISA-L")
check_dir(ui "[<\"](torch/|ATen/|c10/|cuda|cupti|nccl|profiler/)" "ui must not use LibTorch, CUDA or the profiler")
check_dir(profiler "[<\"](QtWidgets|QWidget|QMainWindow|QApplication|ui/|qcustomplot)" "profiler must not use Qt Widgets or ui")
check_dir(app/gui "[<\"](torch/|ATen/|c10/|cuda|cupti|nccl|profiler/)" "the GUI must not use LibTorch or the profiler")

# The GUI's link command (Ninja or Makefiles) must not pull in LibTorch.
file(GLOB_RECURSE link_files "${BINARY_DIR}/app/CMakeFiles/shardscope.dir/link.txt")
foreach(lf ${link_files})
  file(READ "${lf}" content)
  if(content MATCHES "libtorch|libc10|shardscope_profiler")
    list(APPEND violations "shardscope (GUI) links LibTorch or the profiler: ${lf}")
  endif()
endforeach()
if(EXISTS "${BINARY_DIR}/build.ninja")
  file(STRINGS "${BINARY_DIR}/build.ninja" ninja_lines REGEX "^build app/shardscope:")
  foreach(l ${ninja_lines})
    if(l MATCHES "libtorch|libc10|shardscope_profiler")
      list(APPEND violations "shardscope (GUI) links LibTorch or the profiler (build.ninja)")
    endif()
  endforeach()
endif()

if(violations)
  string(REPLACE ";" "\n  " msg "${violations}")
  message(FATAL_ERROR "Layering violations:\n  ${msg}")
endif()
message(STATUS "layering: ok")
