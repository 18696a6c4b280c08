//! Output files written whole or not at all: into a temporary file beside the target,
//! renamed over it once complete, so that an error or an interrupt never leaves half a
//! file — nor destroys the one that was there. What is not a regular file (`/dev/null`,
//! `/dev/stdout`, a pipe) is written straight through; a symbolic link keeps pointing
//! where it did (its target is replaced); a file keeps its permissions; a directory is
//! refused before any work is done.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// Where the bytes go.
enum Sink {
    /// A temporary file beside `dest`, renamed over it at commit.
    Replace(tempfile::NamedTempFile),
    /// A device or a pipe, written as it goes.
    Through(std::fs::File),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::Replace(f) => f.write(buf),
            Sink::Through(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Replace(f) => f.flush(),
            Sink::Through(f) => f.flush(),
        }
    }
}

/// A file being written; it appears under its name only at [`OutputFile::commit`].
pub struct OutputFile {
    w: BufWriter<Sink>,
    /// The regular file replaced at commit (a link's target).
    dest: PathBuf,
    /// The permissions it gets (the old file's, or those of a new one).
    #[cfg(unix)]
    mode: u32,
}

impl OutputFile {
    /// Starts writing `dest` (in its directory, so that the rename cannot cross file
    /// systems).
    pub fn create(dest: &Path) -> Result<Self> {
        let shown = dest.display();
        let existing = std::fs::metadata(dest).ok();
        if let Some(meta) = &existing {
            if meta.is_dir() {
                bail!("{shown}: is a directory");
            }
            if !meta.is_file() {
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(dest)
                    .with_context(|| format!("{shown}: cannot open"))?;
                return Ok(Self {
                    w: BufWriter::new(Sink::Through(f)),
                    dest: dest.to_path_buf(),
                    #[cfg(unix)]
                    mode: 0,
                });
            }
            if meta.permissions().readonly() {
                bail!("{shown}: is read-only");
            }
        }
        // A link is followed: its target is the file replaced.
        let target = match existing {
            Some(_) => {
                std::fs::canonicalize(dest).with_context(|| format!("{shown}: cannot resolve"))?
            }
            None => dest.to_path_buf(),
        };
        let dir = match target.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = target
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(dir)
            .with_context(|| format!("{shown}: cannot create"))?;
        #[cfg(unix)]
        let mode = {
            use std::os::unix::fs::PermissionsExt;
            // Readable as a file made by `File::create` would be (the temporary one is
            // 0600), or as the file it replaces was.
            existing.map_or(0o644, |m| m.permissions().mode() & 0o7777)
        };
        Ok(Self {
            w: BufWriter::new(Sink::Replace(tmp)),
            dest: target,
            #[cfg(unix)]
            mode,
        })
    }

    /// Puts the complete file in place (replacing what was there).
    pub fn commit(self) -> Result<()> {
        let dest = self.dest;
        let cannot = || format!("{}: cannot write", dest.display());
        let sink = self
            .w
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(cannot)?;
        let tmp = match sink {
            Sink::Through(f) => {
                drop(f);
                return Ok(());
            }
            Sink::Replace(tmp) => tmp,
        };
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(self.mode))
                .with_context(cannot)?;
        }
        tmp.persist(&dest)
            .map_err(|e| e.error)
            .with_context(cannot)?;
        Ok(())
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.w.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// Writes `dest` whole with `write`, or leaves it as it was.
pub fn write_whole(dest: &Path, write: impl FnOnce(&mut OutputFile) -> Result<()>) -> Result<()> {
    let mut f = OutputFile::create(dest)?;
    write(&mut f)?;
    f.commit()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temporary_one() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out.csv");
        std::fs::write(&dest, "precious\n").unwrap();
        let failed = write_whole(&dest, |f| {
            writeln!(f, "header")?;
            anyhow::bail!("no queue to write")
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "precious\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        write_whole(&dest, |f| Ok(writeln!(f, "new")?)).unwrap();
        assert_eq!(std::fs::read_to_string(&dest).unwrap(), "new\n");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[cfg(unix)]
    #[test]
    fn devices_links_modes_and_directories_are_respected() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        // A device is written through, not replaced.
        write_whole(Path::new("/dev/null"), |f| Ok(writeln!(f, "gone")?)).unwrap();
        assert!(!std::fs::metadata("/dev/null").unwrap().is_file());
        // A link keeps pointing at its target, which gets the new text.
        let target = dir.path().join("real.csv");
        std::fs::write(&target, "old\n").unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.path().join("link.csv");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_whole(&link, |f| Ok(writeln!(f, "new")?)).unwrap();
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the file keeps its permissions");
        // A directory, or a read-only file, is refused before anything is written.
        let e = OutputFile::create(dir.path()).err().unwrap();
        assert!(e.to_string().contains("is a directory"), "{e}");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o444)).unwrap();
        let e = OutputFile::create(&target).err().unwrap();
        assert!(e.to_string().contains("read-only"), "{e}");
    }
}
