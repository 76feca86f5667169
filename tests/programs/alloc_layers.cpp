// Arrays made through the program's own allocation layers, as C++ codes
// make them: an allocate<T>(n) helper that returns the block, a storage
// template whose setCapacity stores it in its one member (used for four
// arrays of four element types), a vector class whose constructor, copy
// constructor and reserve allocate, and standard containers. Every array
// is swept the same number of times, so each one gets a share of the
// samples. The lines that make the arrays are marked `// makes NAME`.
#include <cstdio>
#include <cstdlib>
#include <unordered_map>
#include <vector>

namespace memory {
enum Policy { HOST, OTHER };

template <typename T> T *allocate(int n, Policy policy) {
  T *block = nullptr;
  switch (policy) {
  case HOST:
    block = new T[n];
    break;
  default:
    std::abort();
  }
  return block;
}
} // namespace memory

template <typename T> class Storage {
public:
  Storage() : _block(nullptr), _capacity(0) {}
  ~Storage() { delete[] _block; }
  void setCapacity(int n, memory::Policy policy) {
    _block = memory::allocate<T>(n, policy);
    _capacity = n;
  }
  T *data() { return _block; }
  int capacity() const { return _capacity; }

private:
  T *_block;
  int _capacity;
};

template <typename T> class Vec {
public:
  Vec() : _data(nullptr), _size(0) {}
  explicit Vec(int n) : _data(memory::allocate<T>(n, memory::HOST)), _size(n) {
    for (int i = 0; i < n; i++)
      _data[i] = T(i % 7);
  }
  Vec(const Vec &other) : _data(nullptr), _size(other._size) {
    _data = memory::allocate<T>(_size, memory::HOST);
    for (int i = 0; i < _size; i++)
      _data[i] = other._data[i];
  }
  ~Vec() { delete[] _data; }
  void reserve(int n) {
    _data = memory::allocate<T>(n, memory::HOST);
    _size = n;
    for (int i = 0; i < n; i++)
      _data[i] = T(i % 5);
  }
  T *data() { return _data; }
  int size() const { return _size; }

private:
  T *_data;
  int _size;
};

struct Facet {
  double normal[3];
  double offset;
};

const int N = 1 << 18;

class Domain {
public:
  Domain() : pressure(N) { // makes pressure
    flux.setCapacity(N, memory::HOST);          // makes flux
    cellIndex.setCapacity(N, memory::HOST);     // makes cellIndex
    weights.setCapacity(N, memory::HOST);       // makes weights
    facets.setCapacity(N / 4, memory::HOST);    // makes facets
    density.reserve(N);                         // makes density
    temperature.resize(N, 1.0);                 // makes temperature
    for (int i = 0; i < N / 8; i++)
      lookup[i * 7] = i * 0.5;                  // makes lookup
    for (int i = 0; i < N; i++) {
      flux.data()[i] = i % 3;
      cellIndex.data()[i] = (i * 31) % N;
      weights.data()[i] = 0.5f * (i % 11);
    }
    for (int i = 0; i < N / 4; i++)
      facets.data()[i] = Facet{{1.0, 0.0, 0.0}, double(i % 13)};
  }
  Storage<double> flux;
  Storage<int> cellIndex;
  Storage<float> weights;
  Storage<Facet> facets;
  Vec<double> pressure;
  Vec<double> density;
  std::vector<double> temperature;
  std::unordered_map<int, double> lookup;
};

static double sweep(Domain &d, Vec<double> &energy) {
  double s = 0.0;
  long whole = 0;
  const double *flux = d.flux.data();
  for (int i = 0; i < N; i++)
    s += flux[i];
  const int *cells = d.cellIndex.data();
  for (int i = 0; i < N; i++)
    whole += cells[i];
  const float *weights = d.weights.data();
  float part = 0.0f;
  for (int i = 0; i < N; i++)
    part += weights[i];
  const Facet *facets = d.facets.data();
  for (int i = 0; i < N / 4; i++)
    s += facets[i].offset;
  const double *pressure = d.pressure.data();
  for (int i = 0; i < N; i++)
    s += pressure[i];
  const double *density = d.density.data();
  for (int i = 0; i < N; i++)
    s += density[i];
  const double *temperature = d.temperature.data();
  for (int i = 0; i < N; i++)
    s += temperature[i];
  const double *e = energy.data();
  for (int i = 0; i < N; i++)
    s += e[i];
  for (int k = 0; k < 4; k++)
    for (int i = 0; i < N / 8; i += 2)
      s += d.lookup.find(i * 7)->second;
  return s + double(whole) + double(part);
}

int main(int argc, char **argv) {
  int sweeps = argc > 1 ? std::atoi(argv[1]) : 150;
  Domain *domain = new Domain();
  Vec<double> energy(domain->pressure); // makes energy
  std::vector<double> upwind(N, 1.0), downwind(N, 2.0); // makes upwind, downwind
  double total = 0.0;
  for (int k = 0; k < sweeps; k++) {
    total += sweep(*domain, energy);
    for (int i = 0; i < N; i++)
      total += upwind[i];
    for (int i = 0; i < N; i++)
      total -= downwind[i];
  }
  std::printf("total %.1f\n", total);
  delete domain;
  return 0;
}
