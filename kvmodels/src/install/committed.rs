//! The committed side of a model: its profile, manifest, fixtures and banked template read
//! from the source tree and checked against the catalog's pins before anything is staged.

use super::*;

/// `PROFILE_DRIFT` for `pid`.
pub(super) fn drift(pid: &str, what: String) -> Error {
    refuse(RefusalCode::ProfileDrift, format!("{pid}: {what}"))
}

/// The committed documents of one model, all pins checked.
pub(super) struct Committed {
    pub(super) profile: Vec<u8>,
    pub(super) manifest: Vec<u8>,
    pub(super) template: Vec<u8>,
    pub(super) fixtures: Vec<(PathBuf, Vec<u8>)>,
    pub(super) index: WeightsIndex,
}

/// Reads the committed documents of `m` for the row `t`, checking every pin.
pub(super) fn load_committed(tree: &SourceTree, m: &ModelEntry, t: &Tuple) -> Result<Committed> {
    let pid = &m.profile_id;
    let set = manifest_set(t.engine).ok_or_else(|| {
        refuse(
            RefusalCode::NoEngineManifest,
            format!("no committed engine manifest set for {}", t.engine),
        )
    })?;
    let profile_rel = format!("profiles/{pid}.yaml");
    let profile = tree.committed_file(&profile_rel)?;
    let manifest_rel = format!("{set}/{pid}.yaml");
    let manifest = tree.committed_file(&manifest_rel)?;
    let template =
        tree.committed_file(&format!("templates/{}/chat_template.jinja", slug(&m.repo)))?;
    let got = sha256_hex(&template);
    if got != m.template_sha256 {
        return Err(refuse(
            RefusalCode::TemplateShaMismatch,
            format!(
                "{pid}: banked chat template hashes to {got}, catalog pins {}",
                m.template_sha256
            ),
        ));
    }
    let p = Profile::parse(&profile, &profile_rel).map_err(|e| drift(pid, e.to_string()))?;
    let checks = [
        ("profileId", p.profile_id.as_str(), Some(pid.as_str())),
        ("baseModel", p.base_model.as_str(), Some(m.repo.as_str())),
        (
            "tokenizerSha256",
            p.tokenizer_sha256.as_str(),
            Some(m.tokenizer_sha256.as_str()),
        ),
        (
            "tokenizerRevision",
            p.tokenizer_revision.as_deref().unwrap_or("(none)"),
            Some(m.revision.as_str()),
        ),
        (
            "templateSha256",
            p.template_sha256.as_deref().unwrap_or("(none)"),
            Some(m.template_sha256.as_str()),
        ),
    ];
    for (k, have, want) in checks {
        if Some(have) != want {
            return Err(drift(
                pid,
                format!(
                    "committed profile {k} {have} is not the catalog's {}",
                    want.unwrap_or("")
                ),
            ));
        }
    }
    let em = EngineManifest::parse(&manifest, &manifest_rel, Some(pid))
        .map_err(|e| drift(pid, e.to_string()))?;
    let release = tree
        .catalog
        .engines
        .iter()
        .find(|e| e.engine == t.engine && e.version == t.engine_version);
    let digest = release
        .and_then(|e| e.digest.as_deref())
        .unwrap_or("(none)");
    if em.image_digest != digest {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} imageDigest {} is not the engine digest {digest}",
                em.image_digest
            ),
        ));
    }
    let want_ver = t
        .engine_version
        .strip_prefix('v')
        .unwrap_or(&t.engine_version);
    if em.engine_version != want_ver {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} engineVersion {} is not {want_ver}",
                em.engine_version
            ),
        ));
    }
    if em.model_revision.as_deref() != Some(m.revision.as_str()) {
        return Err(drift(
            pid,
            format!(
                "{manifest_rel} modelRevision is not the catalog revision {}",
                m.revision
            ),
        ));
    }
    let (ipath, index) = tree.read_index(pid)?;
    if index.sha256 != m.weights_index_sha256 {
        return Err(refuse(
            RefusalCode::IndexShaMismatch,
            format!(
                "{}: hashes to {}, catalog pins {}",
                tree.shown(&ipath),
                index.sha256,
                m.weights_index_sha256
            ),
        ));
    }
    let mut fixtures = Vec::new();
    for sub in FIXTURE_SUBDIRS {
        let dir_rel = if sub.is_empty() {
            format!("probefixtures/{pid}")
        } else {
            format!("probefixtures/{pid}/{sub}")
        };
        if !tree.committed_dir(&dir_rel) {
            continue;
        }
        let mut names: Vec<String> = fs::read_dir(tree.fixtures().join(&dir_rel))
            .map_err(|e| refuse(RefusalCode::CommittedFile, format!("{dir_rel}: {e}")))?
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().map(str::to_string))
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        for n in names {
            let bytes = tree.committed_file(&format!("{dir_rel}/{n}"))?;
            fixtures.push((
                Path::new("probefixtures").join(pid).join(sub).join(&n),
                bytes,
            ));
        }
    }
    if fixtures.is_empty() {
        return Err(refuse(
            RefusalCode::CommittedFile,
            format!("{pid}: no committed probe fixtures"),
        ));
    }
    Ok(Committed {
        profile,
        manifest,
        template,
        fixtures,
        index,
    })
}
