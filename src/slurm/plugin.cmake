# The Slurm plugin (src/slurm/spank_main.cc says how it works), included from src/CMakeLists.txt.
# It compiles its pure parts (berth_slurm_pure: option parsing, the step records, reading
# berth's JSON) in, position-independent and without sanitizers, since it runs
# inside srun and slurmstepd. Built when Slurm's header (Debian's libslurm-dev, which
# scripts/setup.sh installs) is there; the plugin must be built against the Slurm release it is
# loaded by (Slurm checks major.minor). With BERTH_SLURM_PLUGIN_ONLY this file is all that is
# configured, so that the plugin can be built against another release's headers where Berth's
# other dependencies are not installed (tests/e2e/debian_root.py builds it inside a Debian 13
# root, against Slurm 24.11); SLURM_INCLUDE_DIR picks the headers.
set(berth_slurm_pure slurm/options.cc slurm/step_state.cc slurm/berth_output.cc)
find_path(SLURM_INCLUDE_DIR slurm/spank.h)
if(SLURM_INCLUDE_DIR)
  # One file per Slurm context (spank_srun, spank_slurmstepd, spank_job), as pyxis has.
  # runtime/root_emulation.cc: the tasks take the holder's root emulation filter (pyxis's).
  add_library(spank_berth MODULE slurm/spank_main.cc slurm/spank_plugin.cc slurm/spank_srun.cc
                                 slurm/spank_slurmstepd.cc slurm/spank_job.cc
                                 slurm/step_container.cc slurm/task_join.cc slurm/holder.cc
                                 slurm/berth_command.cc slurm/host_agent.cc ${berth_slurm_pure}
                                 runtime/root_emulation.cc)
  set_target_properties(spank_berth PROPERTIES PREFIX "" OUTPUT_NAME spank_berth
                                               LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}
                                               LINK_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/slurm/spank_berth.map)
  target_include_directories(spank_berth PRIVATE ${PROJECT_SOURCE_DIR}/src ${SLURM_INCLUDE_DIR})
  target_compile_options(spank_berth PRIVATE -fno-sanitize=all)
  # Only Slurm's symbols leave the plugin; spank_* and slurm_* come from the process loading it.
  target_link_options(spank_berth PRIVATE -fno-sanitize=all
                      -Wl,--version-script=${CMAKE_CURRENT_SOURCE_DIR}/slurm/spank_berth.map)
  # Slurm's clients inside an sbatch --container-image batch container (slurm/host_tools.h):
  # static, so that it runs in any image; the plugin finds it beside the berth binary.
  add_executable(berth-slurm-client slurm/client_main.cc)
  target_include_directories(berth-slurm-client PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_options(berth-slurm-client PRIVATE -fno-sanitize=all)
  target_link_options(berth-slurm-client PRIVATE -static -fno-sanitize=all)
  add_dependencies(spank_berth berth-slurm-client)

  # Installed where Debian's Slurm looks for plugins (slurm-wlm's PluginDir,
  # lib/<multiarch>/slurm-wlm), relative to the prefix unless an absolute path is given; the
  # client where berth's helpers go (core/helper_path.h). Here rather than in packaging/, so
  # that the plugin-only build installs them too.
  if(CMAKE_LIBRARY_ARCHITECTURE)
    set(berth_plugin_default "lib/${CMAKE_LIBRARY_ARCHITECTURE}/slurm-wlm")
  else()
    set(berth_plugin_default "${CMAKE_INSTALL_LIBDIR}/slurm")
  endif()
  set(BERTH_SLURM_PLUGIN_DIR "${berth_plugin_default}" CACHE STRING
      "Where spank_berth.so is installed (relative: under the prefix)")
  install(TARGETS berth-slurm-client RUNTIME DESTINATION ${CMAKE_INSTALL_LIBEXECDIR}/berth)
  install(TARGETS spank_berth LIBRARY DESTINATION ${BERTH_SLURM_PLUGIN_DIR})
elseif(BERTH_SLURM_PLUGIN_ONLY)
  message(FATAL_ERROR "slurm/spank.h not found (Debian: libslurm-dev): set SLURM_INCLUDE_DIR")
else()
  message(STATUS "slurm/spank.h not found (Debian: libslurm-dev): spank_berth.so is not built")
endif()
