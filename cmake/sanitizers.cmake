# LM_SANITIZE=address,undefined or LM_SANITIZE=thread: compile and link flags for every C++ target
# of this directory and below (included before any target is added). Empty: a normal build.
# NOTE: directory-wide on purpose. XGrammar is compiled from source here, so it is instrumented
# too: under TSan every module must be (an uninstrumented one hides its synchronisation and reports
# races that are not there), and under ASan its accesses to buffers we hand it are checked.
set(LM_SANITIZE "" CACHE STRING "Sanitizers for every target: address,undefined or thread")

# Adds cmake/sanitizer_defaults.cc (the runtimes' default options) to every executable under
# `dir`; the top-level CMakeLists.txt calls it once all targets exist.
function(lm_add_sanitizer_defaults dir)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "EXECUTABLE")
      target_sources(${target} PRIVATE ${PROJECT_SOURCE_DIR}/cmake/sanitizer_defaults.cc)
    endif()
  endforeach()
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(subdir ${subdirs})
    lm_add_sanitizer_defaults(${subdir})
  endforeach()
endfunction()

if(LM_SANITIZE)
  if(LM_SANITIZE MATCHES "thread" AND LM_SANITIZE MATCHES "address")
    message(FATAL_ERROR "LM_SANITIZE: thread cannot be combined with address")
  endif()
  set(lm_sanitize_flags -fsanitize=${LM_SANITIZE} -fno-omit-frame-pointer)
  if(LM_SANITIZE MATCHES "undefined")
    # A UBSan finding aborts the test that hit it instead of printing a line nobody reads.
    list(APPEND lm_sanitize_flags -fno-sanitize-recover=all)
  endif()
  add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:${lm_sanitize_flags}>")
  # GCC's flow analysis sees the sanitizers' extra branches and then warns about reads it can no
  # longer prove initialised; the normal build keeps -Wmaybe-uninitialized as an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options("$<$<COMPILE_LANGUAGE:CXX>:-Wno-maybe-uninitialized>")
  endif()
  # TSan does not model memory fences (GCC 12 rejects them under -fsanitize=thread with -Wtsan,
  # an error with LM_WERROR). The only fences are Boost.Asio's around each handler it runs, whose
  # scheduler already hands handlers over under a mutex that TSan sees. TSan would ignore the
  # fences anyway: the null fenced block changes nothing it checks, only what GCC refuses.
  if(LM_SANITIZE MATCHES "thread")
    add_compile_definitions(BOOST_ASIO_DISABLE_FENCED_BLOCK)
  endif()
  add_link_options(-fsanitize=${LM_SANITIZE})
  message(STATUS "Sanitizers: ${LM_SANITIZE}")
endif()
