"""The credential stores hidden from unasked commands by default (`[sandbox] hide`).

Kept apart from `agentrio.engine.config` because the list is long and changes for its
own reasons: docs/security.md says why each place is on it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["DEFAULT_HIDE"]

#: The credential stores hidden from unasked commands by default (docs/security.md says
#: why each): keys and tokens of ssh, gpg, git forges, clouds, package registries,
#: containers and clusters, infrastructure tools, AI tools, password managers and
#: keyrings; shell and REPL histories (pasted secrets); browser and mail profiles
#: (cookies, saved passwords).
DEFAULT_HIDE: Final[tuple[str, ...]] = (
    # keys, git and forges
    "~/.ssh",
    "~/.gnupg",
    "~/.netrc",
    "~/.git-credentials",
    "~/.gitconfig",
    "~/.config/git",
    "~/.config/gh",
    "~/.config/hub",
    "~/.config/glab-cli",
    # clouds
    "~/.aws",
    "~/.azure",
    "~/.config/gcloud",
    "~/.oci",
    "~/.config/doctl",
    "~/.config/hcloud",
    "~/.config/linode-cli",
    "~/.aliyun",
    "~/.bluemix",
    "~/.ibmcloud",
    "~/.config/scw",
    "~/.fly",
    "~/.config/.wrangler",
    "~/.wrangler",
    "~/.cloudflared",
    "~/.local/share/com.vercel.cli",
    "~/.config/netlify",
    "~/.s3cfg",
    "~/.boto",
    "~/.mc",
    "~/.config/rclone",
    "~/.databrickscfg",
    "~/.snowflake",
    "~/.kaggle",
    # infrastructure
    "~/.vault-token",
    "~/.terraform.d",
    "~/.terraformrc",
    "~/.pulumi",
    "~/.docker",
    "~/.config/containers/auth.json",
    "~/.kube",
    "~/.minikube",
    "~/.talos",
    "~/.config/ngrok",
    "~/.doppler",
    "~/.infisical",
    # package registries
    "~/.npmrc",
    "~/.yarnrc",
    "~/.yarnrc.yml",
    "~/.pypirc",
    "~/.config/pypoetry/auth.toml",
    "~/.cargo/credentials",
    "~/.cargo/credentials.toml",
    "~/.gem/credentials",
    "~/.m2/settings.xml",
    "~/.m2/settings-security.xml",
    "~/.gradle/gradle.properties",
    "~/.composer/auth.json",
    "~/.config/composer/auth.json",
    "~/.nuget/NuGet/NuGet.Config",
    "~/.config/configstore",
    # databases
    "~/.pgpass",
    "~/.my.cnf",
    "~/.dbt",
    # AI tools
    "~/.cache/huggingface/token",
    "~/.huggingface",
    "~/.claude",
    "~/.claude.json",
    "~/.codex",
    "~/.gemini",
    "~/.config/github-copilot",
    # password managers, keyrings, sessions
    "~/.password-store",
    "~/.config/op",
    "~/.config/Bitwarden CLI",
    "~/.local/share/keyrings",
    "~/.pki",
    "~/.config/sops",
    "~/.Xauthority",
    "~/.ICEauthority",
    # shell and REPL histories
    "~/.bash_history",
    "~/.zsh_history",
    "~/.zhistory",
    "~/.histfile",
    "~/.sh_history",
    "~/.local/share/fish",
    "~/.local/share/atuin",
    "~/.python_history",
    "~/.node_repl_history",
    "~/.psql_history",
    "~/.mysql_history",
    "~/.sqlite_history",
    "~/.rediscli_history",
    "~/.lesshst",
    # browsers and mail
    "~/.mozilla",
    "~/.thunderbird",
    "~/.config/google-chrome",
    "~/.config/chromium",
    "~/.config/BraveSoftware",
    "~/.config/microsoft-edge",
    "~/.config/vivaldi",
    "~/.config/opera",
    "~/snap/firefox",
    "~/snap/chromium",
    "~/.var/app",
)
