/* lulesh_proxy: an OpenMP proxy of LULESH 2.0's memory behaviour, written
 * for the overhead harness (benches/src/bin/overhead.rs; not LULESH code).
 *
 * A hexahedral mesh of s^3 elements and (s+1)^3 nodes. Every time step, as
 * LULESH does, allocates its temporaries from the heap and frees them at
 * the end of the phase that used them:
 *   - the stress phase: sigxx/sigyy/sigzz/determ (one double per element)
 *     and the 8-corner forces fx/fy/fz_elem (8 per element, several MB at
 *     s >= 30: glibc serves them with mmap until its dynamic threshold
 *     grows past them);
 *   - the hourglass phase: dvdx/dvdy/dvdz and x8n/y8n/z8n (8 per element);
 *   - the kinematics phase: vnew (one per element);
 *   - the equation of state, per region (REGIONS regions of unequal size):
 *     a dozen arrays of the region's element count (small and mid-size
 *     blocks, as EvalEOSForElems).
 * Elements gather their 8 nodes through a node list; forces are summed
 * per node from the element corners (the nodeElemCornerList scheme LULESH
 * uses with more than one thread). All loops are OpenMP `parallel for`.
 *
 * Usage: lulesh_proxy [s] [iterations]   (default 30 100)
 * Prints a checksum, so that the compiler keeps the work.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REGIONS 11

typedef struct {
    int s, nelem, nnode;
    int *nodelist;      /* 8 per element */
    int *corner_start;  /* per node: start into corner_list (nnode + 1) */
    int *corner_list;   /* element * 8 + corner, per node */
    int *reg_start;     /* REGIONS + 1 starts into reg_elems */
    int *reg_elems;
    double *x, *y, *z, *xd, *yd, *zd, *fx, *fy, *fz, *nmass;
    double *e, *p, *q, *v, *volo, *ss, *delv, *arealg;
} Mesh;

static void *alloc(size_t n) {
    void *p = malloc(n);
    if (!p) {
        perror("malloc");
        exit(1);
    }
    return p;
}

static double *darr(size_t n) { return alloc(n * sizeof(double)); }

static void build(Mesh *m, int s) {
    int sn = s + 1;
    m->s = s;
    m->nelem = s * s * s;
    m->nnode = sn * sn * sn;
    m->nodelist = alloc(8 * (size_t)m->nelem * sizeof(int));
    int e = 0;
    for (int k = 0; k < s; k++)
        for (int j = 0; j < s; j++)
            for (int i = 0; i < s; i++, e++) {
                int n0 = (k * sn + j) * sn + i;
                int *nl = &m->nodelist[8 * e];
                nl[0] = n0;
                nl[1] = n0 + 1;
                nl[2] = n0 + sn + 1;
                nl[3] = n0 + sn;
                nl[4] = n0 + sn * sn;
                nl[5] = n0 + sn * sn + 1;
                nl[6] = n0 + sn * sn + sn + 1;
                nl[7] = n0 + sn * sn + sn;
            }
    m->corner_start = calloc((size_t)m->nnode + 1, sizeof(int));
    for (int c = 0; c < 8 * m->nelem; c++)
        m->corner_start[m->nodelist[c] + 1]++;
    for (int n = 0; n < m->nnode; n++)
        m->corner_start[n + 1] += m->corner_start[n];
    int *fill = calloc((size_t)m->nnode, sizeof(int));
    m->corner_list = alloc(8 * (size_t)m->nelem * sizeof(int));
    for (int c = 0; c < 8 * m->nelem; c++) {
        int n = m->nodelist[c];
        m->corner_list[m->corner_start[n] + fill[n]++] = c;
    }
    free(fill);
    /* Regions of unequal size (1, 2, ..., REGIONS parts), elements dealt
     * round-robin by a hash, as LULESH's random region assignment. */
    m->reg_start = calloc(REGIONS + 1, sizeof(int));
    m->reg_elems = alloc((size_t)m->nelem * sizeof(int));
    int *reg = alloc((size_t)m->nelem * sizeof(int));
    int parts = REGIONS * (REGIONS + 1) / 2;
    for (int i = 0; i < m->nelem; i++) {
        unsigned h = (unsigned)i * 2654435761u;
        int t = (int)(h % (unsigned)parts), r = 0;
        while (t >= r + 1) {
            t -= r + 1;
            r++;
        }
        reg[i] = r;
        m->reg_start[r + 1]++;
    }
    for (int r = 0; r < REGIONS; r++)
        m->reg_start[r + 1] += m->reg_start[r];
    int pos[REGIONS];
    memcpy(pos, m->reg_start, sizeof pos);
    for (int i = 0; i < m->nelem; i++)
        m->reg_elems[pos[reg[i]]++] = i;
    free(reg);
    double **nodal[] = {&m->x, &m->y, &m->z, &m->xd, &m->yd, &m->zd,
                        &m->fx, &m->fy, &m->fz, &m->nmass};
    for (size_t a = 0; a < sizeof nodal / sizeof *nodal; a++)
        *nodal[a] = darr(m->nnode);
    double **elem[] = {&m->e, &m->p, &m->q, &m->v, &m->volo, &m->ss, &m->delv, &m->arealg};
    for (size_t a = 0; a < sizeof elem / sizeof *elem; a++)
        *elem[a] = darr(m->nelem);
    double h = 1.125 / s;
    for (int k = 0; k < sn; k++)
        for (int j = 0; j < sn; j++)
            for (int i = 0; i < sn; i++) {
                int n = (k * sn + j) * sn + i;
                m->x[n] = i * h;
                m->y[n] = j * h;
                m->z[n] = k * h;
                m->xd[n] = m->yd[n] = m->zd[n] = 0;
                m->nmass[n] = h * h * h;
            }
    for (int i = 0; i < m->nelem; i++) {
        m->e[i] = i == 0 ? 3.948746e7 : 0.0;
        m->p[i] = m->q[i] = 0.0;
        m->v[i] = 1.0;
        m->volo[i] = h * h * h;
        m->ss[i] = 1.0;
        m->delv[i] = 0.0;
        m->arealg[i] = h;
    }
}

/* The 8 corners of element e. */
static inline void gather(const Mesh *m, int e, const double *a, double out[8]) {
    const int *nl = &m->nodelist[8 * e];
    for (int c = 0; c < 8; c++)
        out[c] = a[nl[c]];
}

static double volume(const double x[8], const double y[8], const double z[8]) {
    double dx = (x[1] + x[2] + x[5] + x[6]) - (x[0] + x[3] + x[4] + x[7]);
    double dy = (y[2] + y[3] + y[6] + y[7]) - (y[0] + y[1] + y[4] + y[5]);
    double dz = (z[4] + z[5] + z[6] + z[7]) - (z[0] + z[1] + z[2] + z[3]);
    return 0.0625 * dx * dy * dz;
}

/* Sums the element-corner forces into the nodes. */
static void sum_corners(Mesh *m, const double *fxe, const double *fye, const double *fze,
                        double scale) {
#pragma omp parallel for
    for (int n = 0; n < m->nnode; n++) {
        double sx = 0, sy = 0, sz = 0;
        for (int i = m->corner_start[n]; i < m->corner_start[n + 1]; i++) {
            int c = m->corner_list[i];
            sx += fxe[c];
            sy += fye[c];
            sz += fze[c];
        }
        m->fx[n] += scale * sx;
        m->fy[n] += scale * sy;
        m->fz[n] += scale * sz;
    }
}

static void stress_forces(Mesh *m) {
    int ne = m->nelem;
    double *sigxx = darr(ne), *sigyy = darr(ne), *sigzz = darr(ne), *determ = darr(ne);
    double *fxe = darr(8 * (size_t)ne), *fye = darr(8 * (size_t)ne), *fze = darr(8 * (size_t)ne);
#pragma omp parallel for
    for (int e = 0; e < ne; e++)
        sigxx[e] = sigyy[e] = sigzz[e] = -m->p[e] - m->q[e];
#pragma omp parallel for
    for (int e = 0; e < ne; e++) {
        double x[8], y[8], z[8];
        gather(m, e, m->x, x);
        gather(m, e, m->y, y);
        gather(m, e, m->z, z);
        determ[e] = volume(x, y, z);
        for (int c = 0; c < 8; c++) {
            double bx = x[c] - 0.125 * (x[0] + x[1] + x[2] + x[3] + x[4] + x[5] + x[6] + x[7]);
            double by = y[c] - 0.125 * (y[0] + y[1] + y[2] + y[3] + y[4] + y[5] + y[6] + y[7]);
            double bz = z[c] - 0.125 * (z[0] + z[1] + z[2] + z[3] + z[4] + z[5] + z[6] + z[7]);
            fxe[8 * e + c] = -sigxx[e] * bx * determ[e];
            fye[8 * e + c] = -sigyy[e] * by * determ[e];
            fze[8 * e + c] = -sigzz[e] * bz * determ[e];
        }
    }
    sum_corners(m, fxe, fye, fze, 1.0);
    free(fze);
    free(fye);
    free(fxe);
    free(determ);
    free(sigzz);
    free(sigyy);
    free(sigxx);
}

static void hourglass_forces(Mesh *m) {
    int ne = m->nelem;
    size_t n8 = 8 * (size_t)ne;
    double *dvdx = darr(n8), *dvdy = darr(n8), *dvdz = darr(n8);
    double *x8n = darr(n8), *y8n = darr(n8), *z8n = darr(n8);
#pragma omp parallel for
    for (int e = 0; e < ne; e++) {
        double x[8], y[8], z[8];
        gather(m, e, m->x, x);
        gather(m, e, m->y, y);
        gather(m, e, m->z, z);
        for (int c = 0; c < 8; c++) {
            int a = (c + 1) & 7, b = (c + 3) & 7, d = (c + 4) & 7;
            dvdx[8 * e + c] = (y[a] - y[b]) * (z[a] + z[b]) - (y[d] - y[c]) * (z[d] + z[c]);
            dvdy[8 * e + c] = (z[a] - z[b]) * (x[a] + x[b]) - (z[d] - z[c]) * (x[d] + x[c]);
            dvdz[8 * e + c] = (x[a] - x[b]) * (y[a] + y[b]) - (x[d] - x[c]) * (y[d] + y[c]);
            x8n[8 * e + c] = x[c];
            y8n[8 * e + c] = y[c];
            z8n[8 * e + c] = z[c];
        }
    }
    /* Hourglass modes from the corner positions and volume derivatives. */
#pragma omp parallel for
    for (int e = 0; e < ne; e++) {
        double hx = 0, hy = 0, hz = 0;
        for (int c = 0; c < 8; c++) {
            double g = (c & 1 ? 1.0 : -1.0) * ((c >> 1) & 1 ? 1.0 : -1.0);
            hx += g * (x8n[8 * e + c] - dvdx[8 * e + c] * 1e-3);
            hy += g * (y8n[8 * e + c] - dvdy[8 * e + c] * 1e-3);
            hz += g * (z8n[8 * e + c] - dvdz[8 * e + c] * 1e-3);
        }
        double k = -0.01 * m->ss[e] * m->volo[e];
        for (int c = 0; c < 8; c++) {
            double g = (c & 1 ? 1.0 : -1.0) * ((c >> 1) & 1 ? 1.0 : -1.0);
            dvdx[8 * e + c] = k * g * hx;
            dvdy[8 * e + c] = k * g * hy;
            dvdz[8 * e + c] = k * g * hz;
        }
    }
    sum_corners(m, dvdx, dvdy, dvdz, 1.0);
    free(z8n);
    free(y8n);
    free(x8n);
    free(dvdz);
    free(dvdy);
    free(dvdx);
}

static void kinematics(Mesh *m, double dt) {
#pragma omp parallel for
    for (int n = 0; n < m->nnode; n++) {
        double ax = m->fx[n] / m->nmass[n], ay = m->fy[n] / m->nmass[n], az = m->fz[n] / m->nmass[n];
        m->xd[n] = (m->xd[n] + ax * dt) * 0.999;
        m->yd[n] = (m->yd[n] + ay * dt) * 0.999;
        m->zd[n] = (m->zd[n] + az * dt) * 0.999;
        m->x[n] += m->xd[n] * dt;
        m->y[n] += m->yd[n] * dt;
        m->z[n] += m->zd[n] * dt;
        m->fx[n] = m->fy[n] = m->fz[n] = 0;
    }
    int ne = m->nelem;
    double *vnew = darr(ne);
#pragma omp parallel for
    for (int e = 0; e < ne; e++) {
        double x[8], y[8], z[8];
        gather(m, e, m->x, x);
        gather(m, e, m->y, y);
        gather(m, e, m->z, z);
        vnew[e] = volume(x, y, z) / m->volo[e];
    }
#pragma omp parallel for
    for (int e = 0; e < ne; e++) {
        m->delv[e] = vnew[e] - m->v[e];
        m->v[e] = vnew[e];
    }
    free(vnew);
}

/* The equation of state of one region: a dozen temporaries of the
 * region's size, as LULESH's EvalEOSForElems. */
static void eos_region(Mesh *m, const int *elems, int n) {
    double *e_old = darr(n), *delvc = darr(n), *p_old = darr(n), *q_old = darr(n);
    double *compression = darr(n), *comp_half = darr(n), *qq = darr(n), *ql = darr(n);
    double *work = darr(n), *p_new = darr(n), *e_new = darr(n), *q_new = darr(n);
#pragma omp parallel for
    for (int i = 0; i < n; i++) {
        int e = elems[i];
        e_old[i] = m->e[e];
        delvc[i] = m->delv[e];
        p_old[i] = m->p[e];
        q_old[i] = m->q[e];
        qq[i] = 0.5 * m->q[e];
        ql[i] = 0.25 * m->q[e];
        compression[i] = 1.0 / m->v[e] - 1.0;
        comp_half[i] = 1.0 / (m->v[e] - 0.5 * delvc[i]) - 1.0;
        work[i] = 0.0;
    }
    for (int pass = 0; pass < 3; pass++) {
#pragma omp parallel for
        for (int i = 0; i < n; i++) {
            e_new[i] = e_old[i] - 0.5 * delvc[i] * (p_old[i] + q_old[i]) + 0.5 * work[i];
            if (e_new[i] < 0)
                e_new[i] = 0;
            p_new[i] = 0.6667 * (1.0 + compression[i]) * e_new[i];
            double ssc = (0.6667 * e_new[i] + p_new[i]) / (1.0 + comp_half[i]);
            q_new[i] = delvc[i] > 0 ? 0.0 : ssc * ql[i] + qq[i];
            work[i] += 1e-3 * q_new[i];
        }
    }
#pragma omp parallel for
    for (int i = 0; i < n; i++) {
        int e = elems[i];
        m->e[e] = e_new[i];
        m->p[e] = p_new[i];
        m->q[e] = q_new[i];
    }
    free(q_new);
    free(e_new);
    free(p_new);
    free(work);
    free(ql);
    free(qq);
    free(comp_half);
    free(compression);
    free(q_old);
    free(p_old);
    free(delvc);
    free(e_old);
}

int main(int argc, char **argv) {
    int s = argc > 1 ? atoi(argv[1]) : 30;
    int iters = argc > 2 ? atoi(argv[2]) : 100;
    if (s < 2 || iters < 1) {
        fprintf(stderr, "usage: lulesh_proxy [s >= 2] [iterations >= 1]\n");
        return 2;
    }
    Mesh m;
    build(&m, s);
    for (int it = 0; it < iters; it++) {
        stress_forces(&m);
        hourglass_forces(&m);
        kinematics(&m, 1e-7);
        for (int r = 0; r < REGIONS; r++)
            eos_region(&m, &m.reg_elems[m.reg_start[r]], m.reg_start[r + 1] - m.reg_start[r]);
    }
    double sum = 0;
    for (int e = 0; e < m.nelem; e++)
        sum += m.e[e];
    printf("lulesh_proxy: s=%d iterations=%d energy %.6e\n", s, iters, sum);
    return 0;
}
