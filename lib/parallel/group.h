/* group.h - the model's group collectives (model/group.h) over a
 * communicator: the tp group's and the cp group's, made by the training
 * setup and handed to the model. */
#ifndef TITAN_PARALLEL_GROUP_H
#define TITAN_PARALLEL_GROUP_H

#include "backend/backend.h"
#include "comm/comm.h"
#include "model/group.h"

/* For collectives over comm (more than one rank) on be's buffers: device
 * buffers go to the communicator as they are where it moves device memory
 * (NCCL) or the backend's memory is host memory, else through a host mirror
 * the size reserve() asked for. NULL comm or one rank: *out = NULL (no
 * group: the model runs whole). */
titan_status titan_parallel_group_create(titan_group **out, titan_comm *comm, const titan_backend *be);
void titan_parallel_group_free(titan_group *g);

#endif
