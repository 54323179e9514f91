//! Staging one model: every pin verified first, then each file written atomically.

use super::*;

/// Checks and stages one model (and its weights); returns its record.
pub(super) fn install_one(
    ctx: &Ctx,
    m: &ModelEntry,
    t: &Tuple,
    ev: Events<'_>,
) -> Result<ModelRecord> {
    let pid = &m.profile_id;
    let c = load_committed(ctx.tree, m, t)?;
    let cfg_plan = tcfg::plan(pid, m.tokenizer_config_sha256.as_ref(), &c.index)?;
    let tok = tokenizer(ctx, m, ev)?;
    let cfg = tokenizer_config(ctx, m, &cfg_plan, ev)?;
    let dry = ctx.opts.dry_run;
    // The config's sha256: verified bytes, else (a dry run) the catalog's pin.
    let cfg_sha: Option<String> = match (&cfg, &cfg_plan) {
        (Some((_, sha)), _) => Some(sha.clone()),
        (None, ConfigPlan::Pinned { sha256, .. }) => sha256.clone(),
        (None, ConfigPlan::NoneUpstream { .. }) => None,
    };
    let profile = match (&cfg, &cfg_plan) {
        (Some((_, sha)), _) => tcfg::staged_profile(pid, &c.profile, Some(sha))?,
        (None, ConfigPlan::NoneUpstream { .. }) => tcfg::staged_profile(pid, &c.profile, None)?,
        // A dry run that has not seen the config: the profile would be pinned then.
        (None, ConfigPlan::Pinned { .. }) => c.profile.clone(),
    };
    let empty: &[u8] = &[];
    let tok_bytes: &[u8] = tok.as_deref().unwrap_or(empty);
    let mut plan: Vec<(&Path, PathBuf, &[u8])> = vec![(
        &ctx.reg,
        Path::new("artifacts/sha256").join(&m.tokenizer_sha256),
        tok_bytes,
    )];
    let pinned = matches!(cfg_plan, ConfigPlan::Pinned { .. });
    let cfg_bytes: &[u8] = cfg.as_ref().map_or(empty, |(b, _)| b);
    if pinned {
        let name = cfg_sha
            .clone()
            .unwrap_or_else(|| "<sha256 of tokenizer_config.json>".into());
        plan.push((
            &ctx.reg,
            Path::new("artifacts/sha256").join(name),
            cfg_bytes,
        ));
    }
    plan.extend([
        (
            &*ctx.reg,
            Path::new("artifacts/sha256").join(&m.template_sha256),
            &c.template[..],
        ),
        (
            &*ctx.reg,
            PathBuf::from(format!("{pid}.yaml")),
            &profile[..],
        ),
        (
            &*ctx.reg,
            Path::new("manifests").join(format!("{pid}.yaml")),
            &c.manifest[..],
        ),
    ]);
    for (rel, bytes) in &c.fixtures {
        plan.push((&ctx.reg, rel.clone(), bytes));
    }
    plan.push((
        &ctx.tokdir,
        Path::new(&slug(&m.repo)).join("tokenizer.json"),
        tok_bytes,
    ));
    if pinned {
        plan.push((
            &ctx.tokdir,
            Path::new(&slug(&m.repo)).join(tcfg::FILE),
            cfg_bytes,
        ));
    }
    let fixture_dir = Path::new("probefixtures").join(pid);
    no_symlink_below(&ctx.reg, &fixture_dir)?;
    for (root, rel, _) in &plan {
        no_symlink_below(root, rel)?;
    }
    if !dry {
        remove_tree(&ctx.reg, &fixture_dir)?;
        for (root, rel, bytes) in &plan {
            stage_file(root, rel, bytes)?;
        }
    }
    ev(&InstallEvent::Registry {
        dry_run: dry,
        files: plan.len(),
        registry_dir: ctx.reg.clone(),
        tokenizer_dir: ctx.tokdir.clone(),
    });
    let staged: Vec<String> = plan
        .iter()
        .map(|(root, rel, _)| root.join(rel).display().to_string())
        .collect();
    let weights = match &ctx.weights {
        Some(w) => Some(weights(ctx, m, &c.index, w, ev)?),
        None => None,
    };
    Ok(ModelRecord {
        profile_id: pid.clone(),
        action: if dry {
            RecordAction::WouldInstall
        } else {
            RecordAction::Installed
        },
        detail: format!(
            "{}@{} for {} ({})",
            m.repo,
            rev12(&m.revision),
            t.engine,
            state_str(t.state)
        ),
        staged,
        tokenizer_config_sha256: cfg_sha,
        weights,
    })
}
