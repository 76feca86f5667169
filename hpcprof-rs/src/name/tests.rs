//! Naming on constructed source lines and frames, per language and
//! pattern.

use formats::database::Frame;

use super::fortran::*;
use super::frames::*;
use super::heap_name::*;
use super::source::is_library_source;
use super::statement::*;

/// Names one object as the merge does: the site is the innermost frame
/// that rules 1 and 3 of `super::site` do not skip.
fn named(path: &[&Frame], mut read: impl FnMut(&str) -> Option<Vec<String>>) -> String {
    let site = (0..path.len())
        .rev()
        .find(|&i| {
            let f = path[i];
            if is_runtime(f) {
                return false;
            }
            match (f.file.as_deref(), f.line) {
                (Some(file), Some(line)) => match read(file) {
                    Some(lines) => names_at(&lines, line as usize, &f.function) != Some(None),
                    None => true,
                },
                _ => true,
            }
        })
        .unwrap_or(path.len().saturating_sub(1));
    heap_name_with(path, site, None, read)
}

#[test]
fn assignments() {
    assert_eq!(
        assigned_name("  double *A = (double *) malloc(n * sizeof(double));"),
        Some("A".into())
    );
    assert_eq!(assigned_name("A = malloc(n);"), Some("A".into()));
    assert_eq!(
        assigned_name("\ts->grid = calloc(n, sizeof *s->grid); // grid"),
        Some("s->grid".into())
    );
    assert_eq!(
        assigned_name("SD.nuclide_grid = (NuclideGridPoint *) malloc(sz);"),
        Some("SD.nuclide_grid".into())
    );
    assert_eq!(
        assigned_name("    grid_w[i] = malloc(sizeof(double) * n);"),
        Some("grid_w[i]".into())
    );
    assert_eq!(
        assigned_name("grid_w[i + 1] = malloc(8);"),
        Some("grid_w[i + 1]".into())
    );
    assert_eq!(
        assigned_name("struct grid *g = xmalloc(sizeof *g);"),
        Some("g".into())
    );
    assert_eq!(
        assigned_name("double* restrict B = aligned_alloc(64, n);"),
        Some("B".into())
    );
    assert_eq!(
        assigned_name("std::vector<double> v = std::vector<double>(n);"),
        Some("v".into())
    );
    assert_eq!(
        assigned_name("this->data = new double[n];"),
        Some("this->data".into())
    );
    assert_eq!(
        assigned_name("    let mut a: Vec<f64> = vec![0.0; n];"),
        Some("a".into())
    );
    assert_eq!(
        assigned_name("let b = Vec::with_capacity(n);"),
        Some("b".into())
    );
    assert_eq!(assigned_name("*p = malloc(8);"), Some("*p".into()));
}

#[test]
fn not_assignments() {
    assert_eq!(assigned_name("if (a == malloc(3)) {"), None);
    assert_eq!(assigned_name("foo(malloc(n));"), None);
    assert_eq!(assigned_name("x += malloc(3);"), None);
    assert_eq!(assigned_name("return p = malloc(3);"), None);
    // A guard on the same line is not part of the name (hypre's `if
    // (n_fine) assigned = hypre_CTAlloc(...)`).
    assert_eq!(assigned_name("if (x) a = malloc(3);"), Some("a".into()));
    assert_eq!(assigned_name("a[i].b(c = 3);"), None);
    assert_eq!(assigned_name("   "), None);
    assert_eq!(assigned_name("= malloc(3);"), None);
    assert_eq!(
        assigned_name("for (i = 0; i < n; i++) x[i] = malloc(3);"),
        None
    );
}

#[test]
fn returns() {
    assert!(is_return("  return malloc(n);"));
    assert!(is_return("return(p);"));
    assert!(!is_return("returned = 1;"));
    assert!(!is_return("noreturn_f();"));
    assert!(is_return(
        "static double *make(size_t n) { return xmalloc(n); }"
    ));
    let after: Vec<String> = ["  if (!p) abort();", "  return p;", "}"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(returned_later(&after, "p"));
    assert!(!returned_later(&after, "q"));
    let ended: Vec<String> = ["}", "int f() {", "  return p;"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(!returned_later(&ended, "p"));
}

fn frame(function: &str, file: Option<&str>, line: Option<u32>) -> Frame {
    Frame {
        function: function.into(),
        file: file.map(str::to_string),
        line,
        module: "/bin/app".into(),
        inlined: false,
        offset: None,
    }
}

fn source() -> impl FnMut(&str) -> Option<Vec<String>> {
    |file| {
        let text = match file {
            "/src/app.c" => {
                "#include <stdlib.h>\n\
                 static void *xmalloc(size_t n) {\n\
                 \x20 void *p = malloc(n);\n\
                 \x20 if (!p) abort();\n\
                 \x20 return p;\n\
                 }\n\
                 static double *make(size_t n) { return xmalloc(n * 8); }\n\
                 int main(void) {\n\
                 \x20 double *C = make(100);\n\
                 \x20 foo(make(3));\n\
                 \x20 double *D =\n\
                 \x20     malloc(8);\n\
                 }\n"
            }
            _ => return None,
        };
        Some(text.lines().map(str::to_string).collect())
    }
}

#[test]
fn steps_out_of_wrappers() {
    let main = frame("main", Some("/src/app.c"), Some(9));
    let make = frame("make", Some("/src/app.c"), Some(7));
    let xmalloc = frame("xmalloc", Some("/src/app.c"), Some(3));
    let libc = Frame {
        module: "/lib/x86_64-linux-gnu/libc.so.6".into(),
        ..frame("helper", Some("/usr/src/missing.c"), Some(3))
    };
    assert_eq!(named(&[&main, &make, &xmalloc, &libc], source()), "C");
    let call = frame("main", Some("/src/app.c"), Some(10));
    assert_eq!(named(&[&call, &make, &xmalloc], source()), "heap@main:10");
    let split = frame("main", Some("/src/app.c"), Some(12));
    assert_eq!(named(&[&split], source()), "D");
}

#[test]
fn returned_through_a_cast() {
    let after: Vec<String> = ["   if (!ptr) oom();", "   return (char*)ptr;", "}"]
        .map(String::from)
        .to_vec();
    assert!(returned_later(&after, "ptr"));
    let after: Vec<String> = ["   return (void *) (p);"].map(String::from).to_vec();
    assert!(returned_later(&after, "p"));
    let after: Vec<String> = ["   return (double)n;"].map(String::from).to_vec();
    assert!(!returned_later(&after, "p"));
}

#[test]
fn macro_call_left_hand_sides() {
    assert_eq!(
        assigned_name("   hypre_CSRMatrixJ(S_diag) = hypre_CTAlloc(int, num_nonzeros_diag);"),
        Some("hypre_CSRMatrixJ(S_diag)".into())
    );
    assert_eq!(
        assigned_name("  hypre_ParCSRMatrixDiag(A)->data = hypre_CTAlloc(double, n);"),
        Some("hypre_ParCSRMatrixDiag(A)->data".into())
    );
    assert_eq!(
        assigned_name("  if (n_fine) assigned = hypre_CTAlloc(HYPRE_Int, n_fine);"),
        Some("assigned".into())
    );
    assert_eq!(assigned_name("  else if (x) { p = malloc(n); }"), None);
    assert_eq!(assigned_name("  if (x == y) a = 1;"), Some("a".into()));
    assert_eq!(assigned_name("  (p) = malloc(n);"), None);
}

#[test]
fn fortran_allocate_statements() {
    assert_eq!(
        fortran_allocated("  allocate(a(n), b(2*n))"),
        Some(vec!["a".to_string(), "b".to_string()])
    );
    assert_eq!(
        fortran_allocated("10 ALLOCATE (grid%u(n, m), stat=ierr) ! the grid"),
        Some(vec!["grid%u".to_string()])
    );
    assert_eq!(fortran_allocated("  deallocate(a)"), None);
    assert_eq!(fortran_allocated("  call allocate_all(a)"), None);
    let lines: Vec<String> = ["  allocate(a(n), b(m))".to_string()].to_vec();
    let site = Frame {
        offset: Some(0x40),
        ..frame("MAIN__", Some("/src/a.f90"), Some(1))
    };
    let read = |_: &str| Some(lines.clone());
    assert_eq!(heap_name_with(&[&site], 0, Some((1, 2)), read), "b");
    assert_eq!(heap_name_with(&[&site], 0, Some((0, 2)), read), "a");
    // Fewer objects than arrays (one was too small to track): both.
    assert_eq!(heap_name_with(&[&site], 0, Some((0, 1)), read), "a|b");
}

#[test]
fn without_line_information_the_site_names_the_object() {
    let grow = Frame {
        offset: Some(0x1cd),
        ..frame("LAMMPS_NS::AtomVec::grow(int)", None, None)
    };
    let srealloc = frame(
        "LAMMPS_NS::Memory::srealloc(void*, long, char const*)",
        None,
        None,
    );
    assert_eq!(
        heap_name_with(&[&grow, &srealloc], 0, None, |_| None),
        "heap@AtomVec::grow+0x1cd"
    );
}

#[test]
fn falls_back() {
    let nofile = frame("alloc_it", None, None);
    assert_eq!(named(&[&nofile], source()), "heap@alloc_it");
    let unreadable = frame("g", Some("/nope.c"), Some(4));
    assert_eq!(named(&[&unreadable], source()), "heap@g:4");
    assert_eq!(named(&[], source()), "heap@[unknown]");
}

#[test]
fn library_sources() {
    assert!(is_library_source("/usr/include/c++/12/bits/stl_vector.h"));
    assert!(is_library_source(
        "/usr/lib/gcc/x86_64-linux-gnu/12/include/mm_malloc.h"
    ));
    assert!(is_library_source(
        "/opt/gcc-13/include/c++/13/bits/vector.tcc"
    ));
    assert!(is_library_source(
        "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs"
    ));
    assert!(is_library_source(
        "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/lib/rustlib/src/rust/library/alloc/src/vec/mod.rs"
    ));
    assert!(is_library_source(
        "/home/u/.cargo/registry/src/index.crates.io-6f17d22bba15001f/ndarray-0.15.6/src/impl_constructors.rs"
    ));
    assert!(!is_library_source("/work/app/src/main.rs"));
    assert!(!is_library_source("/home/u/include/grid.h"));
}

#[test]
fn constructors() {
    assert_eq!(
        constructor_class("Grid::Grid(unsigned long)"),
        Some("Grid".into())
    );
    assert_eq!(
        constructor_class(
            "ns::Grid<double, 3>::Grid(std::vector<int, std::allocator<int> > const&)"
        ),
        Some("ns::Grid<double, 3>".into())
    );
    assert_eq!(
        constructor_class("(anonymous namespace)::Mesh::Mesh(int)"),
        Some("{anonymous}::Mesh".into())
    );
    assert_eq!(constructor_class("Grid::~Grid()"), None);
    assert_eq!(constructor_class("Grid::resize(unsigned long)"), None);
    assert_eq!(constructor_class("main"), None);
    assert_eq!(constructor_class("rust_vec::main"), None);
    assert_eq!(
        constructor_class("std::vector<double, std::allocator<double> >::vector(unsigned long)"),
        Some("std::vector<double, std::allocator<double> >".into())
    );
}

#[test]
fn member_initialisers() {
    assert_eq!(
        member_initialiser("        : pressure(n, 1.0),"),
        Some("pressure".into())
    );
    assert_eq!(
        member_initialiser("          velocity(n) {"),
        Some("velocity".into())
    );
    assert_eq!(member_initialiser("    , rho{n} {}"), Some("rho".into()));
    assert_eq!(
        member_initialiser("  explicit Grid(int n) : data_(n * n) {}"),
        Some("data_".into())
    );
    // Two on one line: which one allocated is unknown.
    assert_eq!(member_initialiser("  : a(n), b(n) {}"), None);
    // Statements and control headers are not initialisers.
    assert_eq!(member_initialiser("    init(n);"), None);
    assert_eq!(
        member_initialiser("    for (std::size_t i = 0; i < n; i++) {"),
        None
    );
    assert_eq!(member_initialiser("    if (n > 0) {"), None);
    assert_eq!(member_initialiser("  } else {"), None);
}

#[test]
fn method_receivers() {
    assert_eq!(
        method_receiver("  density.resize(n);"),
        Some("density".into())
    );
    assert_eq!(
        method_receiver("grid.density.assign(n, 0.0); // zero"),
        Some("grid.density".into())
    );
    assert_eq!(method_receiver("p->v.push_back(x);"), Some("p->v".into()));
    assert_eq!(
        method_receiver("this->v.reserve(n);"),
        Some("this->v".into())
    );
    assert_eq!(
        method_receiver("        hist.push(0u64);"),
        Some("hist".into())
    );
    assert_eq!(
        method_receiver("    out.extend_from_slice(&buf[..n]);"),
        Some("out".into())
    );
    assert_eq!(
        method_receiver("for (int i = 0; i < n; i++) v.push_back(i);"),
        Some("v".into())
    );
    assert_eq!(
        method_receiver("parts[k].emplace_back(x);"),
        Some("parts[k]".into())
    );
    assert_eq!(method_receiver("v.size();"), None);
    assert_eq!(method_receiver("my_resize(n);"), None);
    assert_eq!(method_receiver("f(x).resize(n);"), None);
    assert_eq!(
        method_receiver("   _isotopes.back()._species[0]._reactions.reserve( n, VAR_MEM);"),
        Some("_isotopes.back()._species[0]._reactions".into())
    );
    assert_eq!(method_receiver("total += v.push(x);"), None);
}

#[test]
fn declarations_with_arguments() {
    assert_eq!(
        declared_name("  std::vector<double> v(n);"),
        Some("v".into())
    );
    assert_eq!(declared_name("Grid grid(N);"), Some("grid".into()));
    assert_eq!(
        declared_name("  Grid grid{N}; // main grid"),
        Some("grid".into())
    );
    assert_eq!(
        declared_name("static std::map<int, std::string> names(init());"),
        Some("names".into())
    );
    assert_eq!(declared_name("foo(n);"), None);
    assert_eq!(declared_name("std::sort(v.begin(), v.end());"), None);
    assert_eq!(declared_name("obj.method(x);"), None);
    assert_eq!(declared_name("throw std::bad_alloc();"), None);
    assert_eq!(declared_name("delete p;"), None);
    assert_eq!(declared_name("static_cast<void>(f(x));"), None);
    assert_eq!(declared_name("std::cout << f(x);"), None);
    assert_eq!(declared_name("Grid grid(N)"), None);
    assert_eq!(declared_name("f(a)(b);"), None);
}

fn lines(text: &str) -> Option<Vec<String>> {
    Some(text.lines().map(str::to_string).collect())
}

/// A C++ program, std::vector's header and Rust's raw_vec, all
/// readable (the library files must be skipped all the same).
fn cpp_and_rust_source() -> impl FnMut(&str) -> Option<Vec<String>> {
    |file| match file {
        "/src/grid.cpp" => lines(
            "#include <vector>\n\
             struct Grid {\n\
             \x20   std::vector<double> pressure, velocity, density;\n\
             \x20   std::vector<double> *extra;\n\
             \x20   explicit Grid(std::size_t n)\n\
             \x20       : pressure(n, 1.0),\n\
             \x20         velocity(n) {\n\
             \x20       density.resize(n);\n\
             \x20       extra = new std::vector<double>(n);\n\
             \x20   }\n\
             };\n\
             struct Sim {\n\
             \x20   Grid grid;\n\
             \x20   Sim(std::size_t n) : grid(n) {}\n\
             };\n\
             static Grid *make(std::size_t n) { return new Grid(n); }\n\
             int main() {\n\
             \x20   Grid grid(1 << 20);\n\
             \x20   auto g = std::make_unique<Grid>(8);\n\
             \x20   Sim sim(4);\n\
             \x20   Grid *m = make(2);\n\
             \x20   use(Grid(3));\n\
             \x20   std::vector<double> v(100);\n\
             \x20   foo(std::vector<int>(5));\n\
             }\n",
        ),
        "/usr/include/c++/12/bits/stl_vector.h" => lines(
            "line 1\n\
             \x20     pointer __new_start(this->_M_allocate(__len));\n\
             \x20 this->_M_impl._M_start = this->_M_allocate(__n);\n",
        ),
        "/rustc/abc/library/alloc/src/raw_vec/mod.rs" => lines(
            "line 1\n\
             \x20       let ptr = match result {\n",
        ),
        "/src/main.rs" => lines(
            "fn main() {\n\
             \x20   let table: Vec<u64> = vec![0; n];\n\
             \x20   let mut hist = Vec::with_capacity(n);\n\
             \x20   hist.push(0u64);\n\
             \x20   consume(vec![1u8; 4096]);\n\
             }\n",
        ),
        _ => None,
    }
}

fn at(function: &str, file: &str, line: u32) -> Frame {
    frame(function, Some(file), Some(line))
}

#[test]
fn cpp_vector_members() {
    let new = frame("operator new(unsigned long)", None, None);
    let alloc = at(
        "std::_Vector_base<double, std::allocator<double> >::_M_create_storage(unsigned long)",
        "/usr/include/c++/12/bits/stl_vector.h",
        3,
    );
    let vector = at(
        "std::vector<double, std::allocator<double> >::vector(unsigned long)",
        "/usr/include/c++/12/bits/stl_vector.h",
        2,
    );
    let ctor = |line| at("Grid::Grid(unsigned long)", "/src/grid.cpp", line);
    let main = |line| at("main", "/src/grid.cpp", line);
    let name = |frames: &[&Frame]| named(frames, cpp_and_rust_source());
    // Member initialisers, through std::vector's inlined frames.
    let (pressure, velocity, density, extra) = (ctor(6), ctor(7), ctor(8), ctor(9));
    assert_eq!(
        name(&[&main(18), &pressure, &vector, &alloc, &new]),
        "grid.pressure"
    );
    assert_eq!(
        name(&[&main(18), &velocity, &vector, &alloc, &new]),
        "grid.velocity"
    );
    // `.resize(` in the constructor's body; `member = new ...`.
    assert_eq!(name(&[&main(18), &density, &alloc, &new]), "grid.density");
    assert_eq!(
        name(&[&main(18), &extra, &vector, &alloc, &new]),
        "grid.extra"
    );
    // Through std::make_unique (a library frame): a pointer.
    let make_unique = at(
        "std::make_unique<Grid, int>(int&&)",
        "/usr/include/c++/12/bits/unique_ptr.h",
        2,
    );
    assert_eq!(
        name(&[&main(19), &make_unique, &pressure, &vector, &alloc, &new]),
        "g->pressure"
    );
    // A member of a member.
    let sim = at("Sim::Sim(unsigned long)", "/src/grid.cpp", 14);
    assert_eq!(
        name(&[&main(20), &sim, &velocity, &vector, &alloc, &new]),
        "sim.grid.velocity"
    );
    // A factory that returns `new Grid(n)`.
    let factory = at("make(unsigned long)", "/src/grid.cpp", 16);
    assert_eq!(
        name(&[&main(21), &factory, &pressure, &vector, &alloc, &new]),
        "m->pressure"
    );
    // No variable holds the Grid: the class qualifies the member.
    assert_eq!(
        name(&[&main(22), &pressure, &vector, &alloc, &new]),
        "Grid::pressure"
    );
    // A plain vector declared with its size.
    assert_eq!(name(&[&main(23), &vector, &alloc, &new]), "v");
    // Not a declaration: the fallback names the user's frame, not the
    // library's.
    assert_eq!(name(&[&main(24), &vector, &alloc, &new]), "heap@main:24");
}

#[test]
fn rust_vecs() {
    let raw_vec = at(
        "alloc::raw_vec::RawVecInner<A>::try_allocate_in",
        "/rustc/abc/library/alloc/src/raw_vec/mod.rs",
        2,
    );
    let from_elem = at(
        "alloc::vec::from_elem",
        "/rustc/abc/library/alloc/src/vec/mod.rs",
        3651,
    );
    let alloc = frame("alloc::alloc::alloc_zeroed", None, None);
    let main = |line| at("rust_vec::main", "/src/main.rs", line);
    let name = |frames: &[&Frame]| named(frames, cpp_and_rust_source());
    assert_eq!(name(&[&main(2), &from_elem, &raw_vec, &alloc]), "table");
    assert_eq!(name(&[&main(3), &raw_vec, &alloc]), "hist");
    assert_eq!(name(&[&main(4), &raw_vec, &alloc]), "hist");
    assert_eq!(
        name(&[&main(5), &from_elem, &raw_vec, &alloc]),
        "heap@rust_vec::main:5"
    );
}

/// `if (posix_memalign(&p, ...)) return 1;` returns a constant, not the
/// allocation: the line is the program's own site, not a wrapper's.
#[test]
fn constant_returns_are_no_wrappers() {
    assert!(returns_allocation("  return malloc(n);"));
    assert!(returns_allocation("return(p);"));
    assert!(returns_allocation("{ return xmalloc(n); }"));
    assert!(returns_allocation("  return new double[n];"));
    for line in [
        "  if (posix_memalign((void **)&pm, 64, n)) return 1;",
        "  if (!p) return NULL;",
        "  if (posix_memalign(&p, 64, n) != 0) return -ENOMEM;",
        "  if ((p = malloc(n)) == NULL) return -1;",
        "  if (!q) return;",
        "  if (!q) { return nullptr; }",
        "  if (!q) return EXIT_FAILURE;",
    ] {
        assert!(!returns_allocation(line), "{line}");
    }
    let lines = ["  if (posix_memalign((void **)&pm, 64, n)) return 1;".to_string()];
    assert_eq!(names_at(&lines, 1, "main"), Some(Some(true)));
}

#[test]
fn out_parameters_name_the_object() {
    for (line, name) in [
        ("  if (posix_memalign((void **)&pm, 64, n)) return 1;", "pm"),
        ("  int rc = posix_memalign((void **)&pr, 64, n);", "pr"),
        ("  rc = posix_memalign(&s->buf, 4096, n);", "s->buf"),
        (
            "  err = posix_memalign((void**)(&grid[i]), 64, n);",
            "grid[i]",
        ),
        ("  posix_memalign(pp, 64, n);", "*pp"),
    ] {
        let lines = [line.to_string()];
        let site = frame("main", Some("/src/a.c"), Some(1));
        let read = |_: &str| Some(lines.to_vec());
        assert_eq!(heap_name_with(&[&site], 0, None, read), name, "{line}");
    }
    assert_eq!(out_param_target("  my_posix_memalign(&p, 64, n);"), None);
    // An assignment inside the condition.
    let lines = ["  if ((buf = malloc(n)) == NULL) return -1;".to_string()];
    let site = frame("main", Some("/src/a.c"), Some(1));
    assert_eq!(
        heap_name_with(&[&site], 0, None, |_| Some(lines.to_vec())),
        "buf"
    );
}

#[test]
fn several_allocations_on_one_line() {
    let t = |s: &str| line_targets(s);
    assert_eq!(
        t("    double *cold = malloc(16 * MIB), *hot = malloc(32 * MIB);"),
        ["cold", "hot"]
    );
    assert_eq!(t("a = malloc(n); b = calloc(n, 8);"), ["a", "b"]);
    assert_eq!(
        t("  s->u = malloc(n), s->v = malloc(n < m ? m : n);"),
        ["s->u", "s->v"]
    );
    assert_eq!(
        t("  struct grid *g = xmalloc(n), **rows = xcalloc(m, 8); // two"),
        ["g", "rows"]
    );
    // One allocation among other declarators: not a multi-allocation line.
    assert!(t("  int n = 4, *p = malloc(n);").is_empty());
    assert!(t("  double *p = malloc(n);").is_empty());
    // C++ declarators with constructor arguments.
    assert_eq!(
        t("  std::vector<double> b(count, 1.0), x(count, 0.0), res(b), ap(count);"),
        ["b", "x", "res", "ap"]
    );
    assert_eq!(t("  std::map<int, double> m{}, n(other);"), ["m", "n"]);
    assert!(t("  std::vector<double> v(n);").is_empty());
    assert!(t("  f(a, b(c));").is_empty());

    let lines = ["    double *cold = malloc(16 * MIB), *hot = malloc(32 * MIB);".to_string()];
    let site = Frame {
        offset: Some(0x40),
        ..frame("main", Some("/src/a.c"), Some(1))
    };
    let read = |_: &str| Some(lines.to_vec());
    assert_eq!(heap_name_with(&[&site], 0, Some((0, 2)), read), "cold");
    assert_eq!(heap_name_with(&[&site], 0, Some((1, 2)), read), "hot");
    // A count that does not match the line: the first, as before.
    assert_eq!(heap_name_with(&[&site], 0, Some((0, 3)), read), "cold");
}

/// The rank of a call among the calls of its line counts the call sites
/// of objects without samples too (frames the merge keeps): one sampled
/// object of `ALLOCATE(a(n/2), b(n))` is `b`, not `a|b`.
#[test]
fn rank_among_all_calls_of_the_line() {
    use formats::database::{DataObject, ObjectKind};
    let dir = std::env::temp_dir().join(format!("rank-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("two.f90");
    std::fs::write(&src, "program two\n  allocate(a(n/2), b(n))\nend program\n").unwrap();
    let file = src.to_str().unwrap();
    let at = |offset| Frame {
        offset: Some(offset),
        ..frame("MAIN__", Some(file), Some(2))
    };
    // Frame 0: `a`'s call (no object), frame 1: `b`'s call.
    let frames = vec![at(0x20), at(0x33)];
    let mut objects = vec![DataObject {
        kind: ObjectKind::Heap,
        alloc_path: vec![1],
        ..DataObject::default()
    }];
    super::name_objects(&mut objects, &frames, &[], &super::Wrappers::default());
    assert_eq!(objects[0].name, "b");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_call_whose_arguments_span_lines_is_named_from_its_first_line() {
    // LULESH: the line table puts `new Domain(...)` at the statement's
    // last line.
    let lines: Vec<String> = [
        "   // Build the main data structure and initialize it",
        "   locDom = new Domain(numRanks, col, row, plane, opts.nx,",
        "                       side, opts.numReg, opts.balance, opts.cost) ;",
        "   foo(a,",
        "       b);",
    ]
    .iter()
    .map(|l| l.to_string())
    .collect();
    let main = Frame {
        function: "main".into(),
        file: Some("lulesh.cc".into()),
        line: Some(3),
        ..Default::default()
    };
    let new = frame("operator new(unsigned long)", None, None);
    let name = heap_name_with(&[&main, &new], 0, None, |_| Some(lines.clone()));
    assert_eq!(name, "locDom");
    // Not across a previous statement; not when the line is balanced.
    assert_eq!(names_at(&lines, 5, "main"), Some(Some(false)));
    assert_eq!(names_at(&lines, 1, "main"), Some(Some(false)));
}
