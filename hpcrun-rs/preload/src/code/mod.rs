//! Beside the flow: the program's code, used by every step that needs a
//! call path or a symbol. Hands the hooks and the sample handler their call
//! paths, the handler the static variable an address falls in, the writer
//! the module list.
//!
//! The program's code: the loaded ELF modules (function symbols, static
//! variables, the static-data map, [`modules`]) and the call-path unwinder
//! built from their `.eh_frame` sections ([`unwind`]): a new module
//! snapshot rebuilds the unwinder from the modules' unwind sections, which
//! is all the unwinder knows of them; a module's build id and unwind
//! sections come from its loaded image ([`elf_image`]), not its file.
//! Functions without a symbol get their ranges from the unwind table
//! ([`eh_ranges`]).

pub mod eh_ranges;
pub mod elf_image;
pub mod modules;
pub mod unwind;
