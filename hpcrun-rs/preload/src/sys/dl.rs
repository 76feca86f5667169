//! The dynamic loader: loaded modules and their segments, `dlsym`,
//! the load bias of a `dlopen` handle.

use std::ffi::{c_int, c_void, CStr};
use std::sync::OnceLock;

/// `dlsym(RTLD_NEXT, name)`.
pub fn next_symbol(name: &CStr) -> *mut c_void {
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) }
}

/// `dlsym(RTLD_NEXT, name)`, resolved once into `cache` (0: not yet, or
/// not found): how an interposed function finds the one it forwards to.
pub fn next_symbol_cached(cache: &std::sync::atomic::AtomicUsize, name: &CStr) -> usize {
    use std::sync::atomic::Ordering::Relaxed;
    let p = cache.load(Relaxed);
    if p != 0 {
        return p;
    }
    let p = next_symbol(name) as usize;
    cache.store(p, Relaxed);
    p
}

/// The first definition of `name` in symbol lookup order, the one the
/// program binds to (`dlsym(RTLD_DEFAULT, name)`; 0: none).
pub fn first_symbol(name: &CStr) -> usize {
    // SAFETY: `name` is NUL-terminated.
    unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr()) as usize }
}

/// False when `addr` is a non-PIE executable's PLT entry for a function
/// that another module defines. Such an executable that takes the
/// function's address (`f = malloc;` compiled without `-fpie`) holds an
/// undefined symbol with the entry's address, the "canonical PLT entry",
/// which [`first_symbol`] returns though calls through it reach the
/// defining library. True for a definition, and when the loader cannot
/// say.
pub fn is_definition(addr: usize) -> bool {
    /// `RTLD_DL_SYMENT` (dlfcn.h): `dladdr1` returns the symbol's entry.
    const RTLD_DL_SYMENT: c_int = 1;
    // SAFETY: dladdr1 only reads the loader's tables and fills `info` and
    // `entry`, which then points at an `Elf64_Sym` in a loaded module's
    // dynamic symbol table (read only here, while the module is loaded).
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        let mut entry: *mut c_void = std::ptr::null_mut();
        if libc::dladdr1(addr as *const c_void, &mut info, &mut entry, RTLD_DL_SYMENT) == 0
            || entry.is_null()
        {
            return true;
        }
        let sym = &*(entry as *const libc::Elf64_Sym);
        !(info.dli_saddr as usize == addr && sym.st_shndx == 0/* SHN_UNDEF */)
    }
}

/// The load address and the file name the loader has (empty for the
/// executable when it keeps none) of the module holding `addr`.
pub fn module_of(addr: usize) -> Option<(usize, String)> {
    // SAFETY: dladdr only reads the loader's tables and fills `info`,
    // whose name points into them.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(addr as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let name = CStr::from_ptr(info.dli_fname)
            .to_string_lossy()
            .into_owned();
        Some((info.dli_fbase as usize, name))
    }
}

/// `name` in the library `lib` if the loader already has it (loaded
/// privately by a `dlopen` too); never loads it. Null when either is
/// missing.
pub fn loaded_library_symbol(lib: &CStr, name: &CStr) -> *mut c_void {
    // SAFETY: `lib` is NUL-terminated; RTLD_NOLOAD only looks the library up.
    let handle = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a handle dlopen returned; `name` is NUL-terminated.
    let f = unsafe { libc::dlsym(handle, name.as_ptr()) };
    // SAFETY: drops the reference RTLD_NOLOAD took (the library stays,
    // held by whoever loaded it).
    unsafe { libc::dlclose(handle) };
    f
}

/// One loaded module as the dynamic loader reports it.
#[derive(Debug, Clone)]
pub struct LoadedModule {
    pub path: String,
    pub bias: u64,
    /// PT_LOAD segments as (start, end, executable).
    pub segments: Vec<(u64, u64, bool)>,
    /// PT_GNU_EH_FRAME as (start, end).
    pub eh_frame_hdr: Option<(u64, u64)>,
    /// PT_NOTE segments as (start, end, alignment).
    pub notes: Vec<(u64, u64, u64)>,
}

impl LoadedModule {
    /// The bytes [start, end) (runtime addresses) of the module's loaded
    /// image, if they lie inside one of its PT_LOAD segments.
    pub fn image_bytes(&self, start: u64, end: u64) -> Option<&[u8]> {
        // SAFETY: the segments are the loader's report of this module's
        // PT_LOAD segments, mapped readable while it stays loaded; the
        // module list is read and used under the module refresh mutex,
        // which the `dlclose` hook takes before the module is unmapped,
        // and the slice does not outlive `self`.
        unsafe { super::mem::loaded_bytes(&self.segments, start, end) }
    }
}

/// The executable's path (`/proc/self/exe`), read once.
static EXE: OnceLock<String> = OnceLock::new();

/// Every module the loader has mapped, the executable first.
pub fn loaded_modules() -> Vec<LoadedModule> {
    unsafe extern "C" fn callback(
        info: *mut libc::dl_phdr_info,
        _size: usize,
        data: *mut c_void,
    ) -> c_int {
        // SAFETY: the loader passes a valid info; `data` is our Vec.
        unsafe {
            let out = &mut *(data as *mut Vec<LoadedModule>);
            let info = &*info;
            let name = if info.dlpi_name.is_null() {
                String::new()
            } else {
                CStr::from_ptr(info.dlpi_name)
                    .to_string_lossy()
                    .into_owned()
            };
            let mut module = LoadedModule {
                path: name,
                bias: info.dlpi_addr,
                segments: Vec::new(),
                eh_frame_hdr: None,
                notes: Vec::new(),
            };
            for i in 0..info.dlpi_phnum as usize {
                let ph = &*info.dlpi_phdr.add(i);
                let start = info.dlpi_addr.wrapping_add(ph.p_vaddr);
                let end = start.wrapping_add(ph.p_memsz);
                match ph.p_type {
                    libc::PT_LOAD => {
                        module
                            .segments
                            .push((start, end, ph.p_flags & libc::PF_X != 0))
                    }
                    libc::PT_GNU_EH_FRAME => module.eh_frame_hdr = Some((start, end)),
                    libc::PT_NOTE => module.notes.push((start, end, ph.p_align)),
                    _ => {}
                }
            }
            out.push(module);
        }
        0
    }
    let mut out: Vec<LoadedModule> = Vec::new();
    // SAFETY: the callback only touches `out` and the loader's data.
    unsafe { libc::dl_iterate_phdr(Some(callback), &mut out as *mut _ as *mut c_void) };
    if let Some(first) = out.first_mut() {
        if first.path.is_empty() {
            // This runs at every dlopen and dlclose: read once.
            first.path = exe_path().to_string();
        }
    }
    out
}

/// The executable's path (`/proc/self/exe`; empty when unreadable), read
/// once per process image: the module list, the launcher check and the
/// process record all ask for it, and reading the link costs about 20 us.
pub fn exe_path() -> &'static str {
    EXE.get_or_init(|| {
        std::fs::read_link("/proc/self/exe")
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
}

/// The address of a function of this library (to find its own module).
pub fn own_address() -> u64 {
    loaded_modules as *const () as usize as u64
}

/// Load bias of the module behind a `dlopen` handle.
///
/// # Safety
/// `handle` must be a live handle returned by `dlopen`.
pub unsafe fn handle_bias(handle: *mut c_void) -> Option<u64> {
    let mut map: *mut c_void = std::ptr::null_mut();
    // SAFETY: RTLD_DI_LINKMAP stores a `struct link_map *` whose first
    // field is `l_addr`, the load bias (glibc's public <link.h> layout).
    unsafe {
        if libc::dlinfo(
            handle,
            libc::RTLD_DI_LINKMAP,
            &mut map as *mut _ as *mut c_void,
        ) != 0
            || map.is_null()
        {
            return None;
        }
        Some(*(map as *const u64))
    }
}
