//! Output files written whole or not at all: into a temporary file beside the target,
//! renamed over it once complete, so that an error or an interrupt never leaves half a
//! file — nor destroys the one that was there.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A file being written; it appears under its name only at [`OutputFile::commit`].
pub struct OutputFile {
    w: BufWriter<tempfile::NamedTempFile>,
    dest: PathBuf,
}

impl OutputFile {
    /// Starts writing `dest` (in its directory, so that the rename cannot cross file
    /// systems).
    pub fn create(dest: &Path) -> Result<Self> {
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let name = dest
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let tmp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(".partial")
            .tempfile_in(dir)
            .with_context(|| format!("{}: cannot create", dest.display()))?;
        Ok(Self {
            w: BufWriter::new(tmp),
            dest: dest.to_path_buf(),
        })
    }

    /// Puts the complete file in place (replacing what was there).
    pub fn commit(self) -> Result<()> {
        let dest = self.dest;
        let cannot = || format!("{}: cannot write", dest.display());
        let tmp = self
            .w
            .into_inner()
            .map_err(|e| e.into_error())
            .with_context(cannot)?;
        // Readable as a file made by `File::create` would be (the temporary one is 0600).
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o644))
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
}
