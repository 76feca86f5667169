// A conjugate-gradient solve on a 27-point stencil whose sparse matrix is
// stored one row per allocation, as reference CG benchmarks written in C++
// do: every row has its own `new double[27]` of values (216 B), its own
// `new int[27]` of local column indices (108 B) and its own
// `new long long[27]` of global indices (216 B, used while building the
// matrix only). The vectors are `new double[n]`.
//
// Usage: cg_rows [NX] [ITERS]: an NX^3 grid (default 48: 110,592 rows),
// ITERS iterations (default 60); prints the residual.
#include <cmath>
#include <cstdio>
#include <cstdlib>

struct Matrix {
  long rows = 0;
  int *nonzeros_in_row = nullptr;
  double **values = nullptr;
  int **local_cols = nullptr;
  long long **global_cols = nullptr;
};

static void generate(Matrix &a, int nx) {
  long n = (long)nx * nx * nx;
  a.rows = n;
  a.nonzeros_in_row = new int[n];
  a.values = new double *[n];
  a.local_cols = new int *[n];
  a.global_cols = new long long *[n];
  for (int iz = 0; iz < nx; iz++)
    for (int iy = 0; iy < nx; iy++)
      for (int ix = 0; ix < nx; ix++) {
        long row = ((long)iz * nx + iy) * nx + ix;
        a.values[row] = new double[27];      // values row
        a.local_cols[row] = new int[27];     // local index row
        a.global_cols[row] = new long long[27];  // global index row
        int k = 0;
        for (int sz = -1; sz <= 1; sz++)
          for (int sy = -1; sy <= 1; sy++)
            for (int sx = -1; sx <= 1; sx++) {
              int jx = ix + sx, jy = iy + sy, jz = iz + sz;
              if (jx < 0 || jx >= nx || jy < 0 || jy >= nx || jz < 0 || jz >= nx)
                continue;
              long col = ((long)jz * nx + jy) * nx + jx;
              a.global_cols[row][k] = col;
              a.values[row][k] = col == row ? 26.0 : -1.0;
              k++;
            }
        a.nonzeros_in_row[row] = k;
        for (int j = 0; j < k; j++)
          a.local_cols[row][j] = (int)a.global_cols[row][j];
      }
}

static void spmv(const Matrix &a, const double *x, double *y) {
  for (long i = 0; i < a.rows; i++) {
    const double *vals = a.values[i];
    const int *cols = a.local_cols[i];
    int nnz = a.nonzeros_in_row[i];
    double sum = 0.0;
    for (int j = 0; j < nnz; j++)
      sum += vals[j] * x[cols[j]];
    y[i] = sum;
  }
}

static double dot(long n, const double *x, const double *y) {
  double s = 0.0;
  for (long i = 0; i < n; i++)
    s += x[i] * y[i];
  return s;
}

static void waxpby(long n, double alpha, const double *x, double beta,
                   const double *y, double *w) {
  for (long i = 0; i < n; i++)
    w[i] = alpha * x[i] + beta * y[i];
}

int main(int argc, char **argv) {
  int nx = argc > 1 ? atoi(argv[1]) : 48;
  int iters = argc > 2 ? atoi(argv[2]) : 60;
  Matrix a;
  generate(a, nx);
  long n = a.rows;
  double *b = new double[n];
  double *x = new double[n];
  double *r = new double[n];
  double *p = new double[n];
  double *ap = new double[n];
  for (long i = 0; i < n; i++) {
    b[i] = 27.0 - a.nonzeros_in_row[i];
    x[i] = 0.0;
  }
  waxpby(n, 1.0, b, 0.0, b, r);
  waxpby(n, 1.0, r, 0.0, r, p);
  double rr = dot(n, r, r);
  for (int it = 0; it < iters && rr > 1e-30; it++) {
    spmv(a, p, ap);
    double alpha = rr / dot(n, p, ap);
    waxpby(n, 1.0, x, alpha, p, x);
    waxpby(n, 1.0, r, -alpha, ap, r);
    double next = dot(n, r, r);
    waxpby(n, 1.0, r, next / rr, p, p);
    rr = next;
  }
  printf("residual %.6e\n", std::sqrt(rr));
  for (long i = 0; i < n; i++) {
    delete[] a.values[i];
    delete[] a.local_cols[i];
    delete[] a.global_cols[i];
  }
  delete[] a.values;
  delete[] a.local_cols;
  delete[] a.global_cols;
  delete[] a.nonzeros_in_row;
  delete[] b;
  delete[] x;
  delete[] r;
  delete[] p;
  delete[] ap;
  return 0;
}
