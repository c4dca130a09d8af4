/* Preloaded (LD_PRELOAD) to make this process's Open MPI claim another release: the component's
 * version check must then refuse to load, saying so, and MPI's own collectives serve. */
const char ompi_version_string[] = "5.0.3";
