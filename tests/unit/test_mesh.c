/* test_mesh.c - the device mesh (lib/parallel/mesh.c): coordinates and communicators.
 *
 *   test_mesh                        run alone: jobs of 2, 4, 8 and 32 ranks of itself
 *   test_mesh --suite mesh LAYOUT    one rank of a job (parallel_test.h)
 *
 * For each layout every rank checks, against the documented order (mesh.h,
 * tensor/layout.h: [pp, dp_replicate, dp_shard, cp, tp], row-major, tp
 * fastest), decoded here from the rank number by hand: its coordinates,
 * dp rank and size; then every communicator: NULL exactly when its group
 * is one rank, else its size, this rank's place in it (shard: dp_shard x
 * cp + cp; the others: the coordinate along their axis) and its members,
 * all-gathered over it and compared rank by rank with the world ranks the
 * group must hold. Also: data_parallel_shard_degree = -1 takes the ranks
 * the others leave, and degrees that do not multiply to the job's size
 * are refused. */
#include "parallel_test.h"

enum { AX_PP = 1, AX_REP = 2, AX_SHARD = 4, AX_CP = 8, AX_TP = 16 };

typedef struct {
    int pp, rep, shard, cp, tp;
} coord;

/* The documented order, written out: tp fastest, then cp, dp_shard, dp_replicate, pp. */
static coord decode(const titan_layout *l, int r) {
    coord c;
    c.tp = r % l->tp, r /= l->tp;
    c.cp = r % l->cp, r /= l->cp;
    c.shard = r % l->dp_shard, r /= l->dp_shard;
    c.rep = r % l->dp_replicate, r /= l->dp_replicate;
    c.pp = r;
    return c;
}

/* The world ranks of the group of `me` along `axes`, in the group's rank
 * order (its key: the coordinate along the axis; shard x cp + cp for the
 * shard group). Returns how many; *pos: me's place. */
static int group_of(const titan_layout *l, int me, unsigned axes, int *members, int *pos) {
    coord c = decode(l, me);
    int n = 0;
    for (int r = 0; r < titan_layout_world(l); r++) {
        coord o = decode(l, r);
        if ((!(axes & AX_PP) && o.pp != c.pp) || (!(axes & AX_REP) && o.rep != c.rep) ||
            (!(axes & AX_SHARD) && o.shard != c.shard) || (!(axes & AX_CP) && o.cp != c.cp) ||
            (!(axes & AX_TP) && o.tp != c.tp))
            continue;
        int key = axes == (AX_SHARD | AX_CP) ? o.shard * l->cp + o.cp
                  : axes == AX_PP            ? o.pp
                  : axes == AX_REP           ? o.rep
                  : axes == AX_CP            ? o.cp
                                             : o.tp;
        members[key] = r;
        if (r == me) *pos = key;
        n++;
    }
    return n;
}

static int check_comm(const titan_layout *l, int me, titan_comm *comm, unsigned axes, const char *name,
                      const char *ls) {
    int members[64], pos = -1;
    int n = group_of(l, me, axes, members, &pos);
    if (n == 1) {
        CHECK(comm == NULL, "%s, rank %d: %s communicator of one rank is not NULL", ls, me, name);
        return 0;
    }
    CHECK(comm != NULL, "%s, rank %d: no %s communicator (group of %d)", ls, me, name, n);
    if (!comm) return 1;
    CHECK(titan_comm_size(comm) == n && titan_comm_rank(comm) == pos, "%s, rank %d: %s is rank %d of %d, want %d of %d",
          ls, me, name, titan_comm_rank(comm), titan_comm_size(comm), pos, n);
    int32_t got[64] = {0}, mine = me;
    CHECK(titan_comm_all_gather(comm, &mine, got, 1, TITAN_DTYPE_U32, NULL) == TITAN_OK, "%s: all_gather", name);
    int bad = 0;
    for (int k = 0; k < n; k++) bad += got[k] != members[k];
    CHECK(bad == 0, "%s, rank %d: %s members differ from the documented group", ls, me, name);
    return n;
}

static int run_layout(const titan_layout *l) {
    char ls[TITAN_LAYOUT_STR_MAX];
    titan_layout_format(l, ls, sizeof ls);
    titan_mesh m;
    if (!mesh_join(l, &m)) return 1;
    int me = m.rank, W = titan_layout_world(l);
    int f0 = failures;
    CHECK(m.world == W && memcmp(&m.layout, l, sizeof *l) == 0 && strcmp(m.layout_str, ls) == 0,
          "%s: mesh of %d ranks, layout %s", ls, m.world, m.layout_str);
    coord c = decode(l, me);
    CHECK(m.pp_rank == c.pp && m.shard_rank == c.shard && m.cp_rank == c.cp && m.tp_rank == c.tp,
          "%s, rank %d: coordinates pp %d shard %d cp %d tp %d, want %d %d %d %d", ls, me, m.pp_rank, m.shard_rank,
          m.cp_rank, m.tp_rank, c.pp, c.shard, c.cp, c.tp);
    CHECK(m.dp_rank == c.rep * l->dp_shard + c.shard && m.dp_size == l->dp_replicate * l->dp_shard,
          "%s, rank %d: dp rank %d of %d", ls, me, m.dp_rank, m.dp_size);
    titan_layout_coord lc;
    titan_layout_coord_of(l, me, &lc);
    CHECK(lc.pp == c.pp && lc.dp_replicate == c.rep && lc.dp_shard == c.shard && lc.cp == c.cp && lc.tp == c.tp &&
              titan_layout_rank_of(l, &lc) == me, "%s, rank %d: titan_layout_coord_of", ls, me);
    CHECK(m.world_comm && titan_comm_size(m.world_comm) == W && titan_comm_rank(m.world_comm) == me,
          "%s: world communicator", ls);
    int ns = check_comm(l, me, m.shard_comm, AX_SHARD | AX_CP, "shard", ls);
    int nr = check_comm(l, me, m.replicate_comm, AX_REP, "replicate", ls);
    int nt = check_comm(l, me, m.tp_comm, AX_TP, "tp", ls);
    int nc = check_comm(l, me, m.cp_comm, AX_CP, "cp", ls);
    int np = check_comm(l, me, m.pp_comm, AX_PP, "pp", ls);
    check_comm(l, me, m.pp_grad_comm, AX_PP, "pp-grad", ls);
    CHECK(!m.pp_comm || m.pp_comm != m.pp_grad_comm, "%s: one pp communicator for both directions", ls);
    /* every rank agrees it passed */
    int ok = failures == f0;
    uint64_t all_ok = 0;
    double okd = ok, sum = 0;
    CHECK(titan_comm_sum_double(m.world_comm, okd, &sum) == TITAN_OK);
    all_ok = sum == W;
    if (me == 0)
        printf("  %d ranks, %s: coordinates, dp rank; communicators world %d, shard %d, replicate %d, tp %d, cp %d, "
               "pp %d (x2): sizes, ranks and members %s\n",
               W, ls, W, ns ? ns : 1, nr ? nr : 1, nt ? nt : 1, nc ? nc : 1, np ? np : 1,
               all_ok ? "as documented" : "WRONG");
    titan_mesh_free(&m);
    return ok ? 0 : 1;
}

/* data_parallel_shard_degree = -1, and degrees that do not fit the job. */
static int run_resolve(const titan_layout *l) {
    int W = titan_layout_world(l);
    titan_job_config cfg;
    titan_config_defaults(&cfg);
    titan_mesh m;
    cfg.parallelism_data_parallel_shard_degree = -1;
    cfg.parallelism_tensor_parallel_degree = 2;
    titan_status st = titan_mesh_init(&cfg, &m);
    CHECK(st == TITAN_OK && m.layout.dp_shard == W / 2 && m.layout.tp == 2 && m.dp_size == W / 2,
          "dp_shard -1, tp 2 on %d ranks: dp_shard %d", W, m.layout.dp_shard);
    titan_mesh_free(&m);
    cfg.parallelism_data_parallel_shard_degree = W;
    st = titan_mesh_init(&cfg, &m);
    CHECK(st == TITAN_ERR_USAGE && has("degrees multiply"), "dp_shard %d x tp 2 on %d ranks: refused", W, W);
    titan_mesh_free(&m);
    cfg.parallelism_data_parallel_shard_degree = -1;
    cfg.parallelism_tensor_parallel_degree = 3;
    st = titan_mesh_init(&cfg, &m);
    CHECK(st == TITAN_ERR_USAGE && has("cannot be split"), "dp_shard -1 x tp 3 on %d ranks: refused", W);
    titan_mesh_free(&m);
    return 0;
}

static int run(const titan_layout *l) {
    if (l->dp_shard == 2 && l->dp_replicate * l->cp * l->tp * l->pp == 1) run_resolve(l);
    return run_layout(l);
}

int main(int argc, char **argv) {
    static const parallel_job jobs[] = {
        {2, "dp_shard=2"}, {2, "dp_replicate=2"}, {2, "tp=2"}, {2, "cp=2"}, {2, "pp=2"},
        {4, "dp_replicate=2,dp_shard=2"}, {4, "pp=2,dp_shard=2"}, {4, "dp_shard=2,tp=2"}, {4, "dp_shard=2,cp=2"},
        {4, "cp=2,tp=2"}, {4, "pp=2,dp_replicate=2"}, {4, "pp=4"},
        {8, "pp=2,dp_replicate=2,dp_shard=2"}, {8, "dp_shard=2,cp=2,tp=2"}, {8, "pp=2,dp_replicate=2,tp=2"},
        {8, "dp_replicate=2,cp=2,tp=2"}, {32, "pp=2,dp_replicate=2,dp_shard=2,cp=2,tp=2"},
    };
    return parallel_main(argc, argv, "test_mesh", "mesh", run, jobs, (int)(sizeof jobs / sizeof *jobs));
}
