# `cmake --install`: the library and its headers, the tools, the Open MPI component, and what
# finds them: ibcollConfig.cmake (find_package) and ibcoll.pc (pkg-config).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

install(TARGETS ibcoll EXPORT ibcollTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/ibcoll DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT ibcollTargets NAMESPACE ibcoll::
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibcoll)
configure_package_config_file(cmake/ibcollConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ibcollConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibcoll)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ibcollConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)  # 0.x: minor versions may break the API
install(FILES ${PROJECT_BINARY_DIR}/ibcollConfig.cmake ${PROJECT_BINARY_DIR}/ibcollConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/ibcoll)
# Relocatable: the prefix is found from where the .pc file lies (cmake --install --prefix).
file(RELATIVE_PATH IBCOLL_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" IBCOLL_PC_TO_PREFIX "${IBCOLL_PC_TO_PREFIX}")
configure_file(cmake/ibcoll.pc.in ${PROJECT_BINARY_DIR}/ibcoll.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ibcoll.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS ibcoll_bench ibcoll_info RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
set_target_properties(ibcoll_bench ibcoll_info PROPERTIES
  INSTALL_RPATH "$ORIGIN/../${CMAKE_INSTALL_LIBDIR}")
if(IBCOLL_WITH_OMPI)
  # Next to libibcoll, not into Open MPI's own directory: point Open MPI at it with
  # OMPI_MCA_mca_base_component_path=<Open MPI's pkglibdir>:<prefix>/lib/openmpi (README).
  install(TARGETS mca_coll_ibcoll LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}/openmpi)
  set_target_properties(mca_coll_ibcoll PROPERTIES INSTALL_RPATH "$ORIGIN/..")
endif()
