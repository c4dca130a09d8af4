/* The component: its MCA parameters, the version check, and which communicators it serves. */
#include "ompi_config.h"

#include <stdio.h>
#include <string.h>

#include "coll_ibcoll.h"
#include "ompi/runtime/mpiruntime.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/util/output.h"

static int ibcoll_register(void);
static int ibcoll_open(void);
static int ibcoll_close(void);
static int ibcoll_init_query(bool enable_progress_threads, bool enable_mpi_threads);

mca_coll_ibcoll_component_t mca_coll_ibcoll_component = {
    .super =
        {
            .collm_version =
                {
                    MCA_COLL_BASE_VERSION_2_0_0,
                    .mca_component_name = "ibcoll",
                    MCA_BASE_MAKE_VERSION(component, IBCOLL_VERSION_MAJOR, IBCOLL_VERSION_MINOR, 0),
                    .mca_open_component = ibcoll_open,
                    .mca_close_component = ibcoll_close,
                    .mca_register_component_params = ibcoll_register,
                },
            .collm_data = {MCA_BASE_METADATA_PARAM_NONE},
            .collm_init_query = ibcoll_init_query,
            .collm_comm_query = mca_coll_ibcoll_comm_query,
        },
    .priority = 0, /* no module until raised: ibcoll serves only when asked to */
    .verbose = 0,
    .enable = true,
    .allreduce_max_bytes = 0,
    .bcast_max_bytes = 0,
    .allreduce_algorithm = NULL,
    .bcast_algorithm = NULL,
    .timeout = NULL,
    .output = -1,
};

static void register_var(const char* name, const char* help, mca_base_var_type_t type,
                         void* storage) {
  (void)mca_base_component_var_register(&mca_coll_ibcoll_component.super.collm_version, name, help,
                                        type, NULL, 0, 0, OPAL_INFO_LVL_6,
                                        MCA_BASE_VAR_SCOPE_READONLY, storage);
}

static int ibcoll_register(void) {
  mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  register_var("priority",
               "Priority of coll/ibcoll: 0 or below offers no module; above 30 (tuned) it takes "
               "MPI_Allreduce/MPI_Bcast, above 10 (libnbc) MPI_Iallreduce/MPI_Ibcast",
               MCA_BASE_VAR_TYPE_INT, &c->priority);
  register_var("verbose",
               "Verbosity: 1 prints what ibcoll ran at finalize, 10 every call (with the algorithm "
               "ibcoll chose)",
               MCA_BASE_VAR_TYPE_INT, &c->verbose);
  register_var("enable", "Offer coll/ibcoll at all", MCA_BASE_VAR_TYPE_BOOL, &c->enable);
  register_var("allreduce_max_bytes",
               "Largest MPI_Allreduce/MPI_Iallreduce (bytes per rank) ibcoll takes; 0: any",
               MCA_BASE_VAR_TYPE_SIZE_T, &c->allreduce_max_bytes);
  register_var("bcast_max_bytes", "Largest MPI_Bcast/MPI_Ibcast (bytes) ibcoll takes; 0: any",
               MCA_BASE_VAR_TYPE_SIZE_T, &c->bcast_max_bytes);
  c->allreduce_algorithm = "auto";
  register_var(
      "allreduce_algorithm",
      "Force an ibcoll allreduce algorithm (IBCOLL_ALLREDUCE_ALGO; ibcoll_info lists them)",
      MCA_BASE_VAR_TYPE_STRING, &c->allreduce_algorithm);
  c->bcast_algorithm = "auto";
  register_var("bcast_algorithm",
               "Force an ibcoll bcast algorithm (IBCOLL_BCAST_ALGO; ibcoll_info lists them)",
               MCA_BASE_VAR_TYPE_STRING, &c->bcast_algorithm);
  c->timeout = "";
  register_var("timeout",
               "Deadline of an ibcoll call, for hangs (IBCOLL_TIMEOUT: e.g. 10m, 90s; 0: none; "
               "empty: as set, else 10m); dead ranks are detected whatever it is",
               MCA_BASE_VAR_TYPE_STRING, &c->timeout);
  return OMPI_SUCCESS;
}

/* "4.1.4" is 4.1 as built for; 5.x changed the coll API, and 4.0 differs too. */
static bool runtime_matches_build(void) {
  int major = -1, minor = -1;
  return sscanf(ompi_version_string, "%d.%d", &major, &minor) == 2 && major == OMPI_MAJOR_VERSION &&
         minor == OMPI_MINOR_VERSION;
}

static int ibcoll_open(void) {
  mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  if (!runtime_matches_build()) {
    opal_output(0,
                "coll:ibcoll: built for Open MPI %d.%d, but this is Open MPI %s: not loading "
                "(rebuild ibcoll against this Open MPI)",
                OMPI_MAJOR_VERSION, OMPI_MINOR_VERSION, ompi_version_string);
    return OMPI_ERROR;
  }
  c->output = opal_output_open(NULL);
  opal_output_set_verbosity(c->output, c->verbose);
  return OMPI_SUCCESS;
}

static int ibcoll_close(void) {
  mca_coll_ibcoll_component_t* c = &mca_coll_ibcoll_component;
  if (c->output >= 0) opal_output_close(c->output);
  c->output = -1;
  return OMPI_SUCCESS;
}

static int ibcoll_init_query(bool enable_progress_threads, bool enable_mpi_threads) {
  /* MPI_THREAD_MULTIPLE, or a progress thread of Open MPI's own that may run our callback */
  mca_coll_ibcoll_threads_at_once(enable_mpi_threads || enable_progress_threads);
  return mca_coll_ibcoll_component.enable ? OMPI_SUCCESS : OMPI_ERR_NOT_AVAILABLE;
}
