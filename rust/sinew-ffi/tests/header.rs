//! The committed header `ffi/sinew.h` is exactly what cbindgen makes of this crate.
//!
//! When the ABI changes on purpose, regenerate it with
//! `SINEW_BLESS=1 cargo test -p sinew-ffi --test header` and commit the result.

use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn header_path() -> PathBuf {
    repo_root().join("ffi/sinew.h")
}

/// The header as cbindgen writes it from `cbindgen.toml`, plus the library version defines.
fn generate() -> String {
    let crate_dir = env!("CARGO_MANIFEST_DIR");
    let mut config = cbindgen::Config::from_file(format!("{crate_dir}/cbindgen.toml")).expect("cbindgen.toml");
    let version = format!(
        "\n/** Version of the sinew library this header was generated from. */\n\
         #define SINEW_VERSION_MAJOR {}\n#define SINEW_VERSION_MINOR {}\n#define SINEW_VERSION_PATCH {}\n\
         #define SINEW_VERSION_STRING \"{}\"\n",
        env!("CARGO_PKG_VERSION_MAJOR"),
        env!("CARGO_PKG_VERSION_MINOR"),
        env!("CARGO_PKG_VERSION_PATCH"),
        env!("CARGO_PKG_VERSION"),
    );
    config.after_includes = Some(version + config.after_includes.as_deref().unwrap_or(""));
    let bindings = cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen failed to generate the header");
    let mut out = Vec::new();
    bindings.write(&mut out);
    String::from_utf8(out).expect("header is UTF-8")
}

#[test]
fn committed_header_is_current() {
    let fresh = generate();
    let path = header_path();
    if std::env::var_os("SINEW_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write ffi/sinew.h");
        eprintln!("wrote {}", path.display());
        return;
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != fresh {
        let first = committed
            .lines()
            .zip(fresh.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(fresh.lines().count()));
        panic!(
            "ffi/sinew.h is out of date (first difference at line {}).\n\
             Regenerate it with `SINEW_BLESS=1 cargo test -p sinew-ffi --test header` and commit it.\n\
             committed: {:?}\ngenerated: {:?}",
            first + 1,
            committed.lines().nth(first),
            fresh.lines().nth(first),
        );
    }
}

/// The defines a C program checks at compile time agree with the library.
#[test]
fn header_versions_match_the_crate() {
    let h = std::fs::read_to_string(header_path()).expect("ffi/sinew.h");
    let define = |name: &str| -> String {
        h.lines()
            .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
            .unwrap_or_else(|| panic!("no #define {name}"))
            .trim()
            .to_owned()
    };
    assert_eq!(define("SINEW_ABI_VERSION_MAJOR"), sinew::SINEW_ABI_VERSION_MAJOR.to_string());
    assert_eq!(define("SINEW_ABI_VERSION_MINOR"), sinew::SINEW_ABI_VERSION_MINOR.to_string());
    assert_eq!(define("SINEW_VERSION_MAJOR"), env!("CARGO_PKG_VERSION_MAJOR"));
    assert_eq!(define("SINEW_VERSION_STRING"), format!("\"{}\"", env!("CARGO_PKG_VERSION")));
}

/// Every exported function is `sinew_*`, declared in the header, and documented there.
#[test]
fn every_function_is_prefixed_and_documented() {
    let h = std::fs::read_to_string(header_path()).expect("ffi/sinew.h");
    let lines: Vec<&str> = h.lines().collect();
    let mut functions = 0;
    for (i, line) in lines.iter().enumerate() {
        // Declarations look like `sinew_status sinew_rig_new(` or `const char *sinew_version(void);`.
        let Some(paren) = line.find('(') else { continue };
        if line.starts_with(' ') || line.starts_with('#') || line.starts_with('*') || line.starts_with('/') {
            continue;
        }
        let name = line[..paren].rsplit([' ', '*']).next().unwrap();
        if name.is_empty() {
            continue;
        }
        functions += 1;
        assert!(name.starts_with("sinew_"), "exported function {name} lacks the sinew_ prefix");
        assert!(lines[..i].last().is_some_and(|l| l.trim_end().ends_with("*/")), "{name} has no doc comment");
    }
    assert!(functions >= 40, "only {functions} functions found in the header");
}
