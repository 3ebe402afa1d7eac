"""Stacks no BESSER generator covers: write only the build configuration they need.

When the request names a stack such as Next.js, Rust or Kotlin/Spring, no deterministic
generator produces it; Phase 1 then writes the minimal build files (package manifest,
compiler settings) so Phase 2 starts from a project the toolchain recognises instead of
inventing versions and layout. Nothing else is written: the code is Phase 2's job.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from kernel_ext.generation.targets import GeneratorSpec, NoOptions

_PATTERNS = {
    "nextjs": re.compile(r"\bnext(\.|\s)?js\b|\bnextjs\b", re.IGNORECASE),
    "rust": re.compile(r"\brust\b|\baxum\b|\bactix\b|\bcargo\b", re.IGNORECASE),
    "kotlin_spring": re.compile(r"\bkotlin\b", re.IGNORECASE),
}


def detect_stack(request: str) -> str | None:
    """The metadata stack a request names, if any (first match in a fixed order)."""
    for stack, pattern in _PATTERNS.items():
        if pattern.search(request or ""):
            return stack
    return None


def _slug(name: str, sep: str) -> str:
    words = re.findall(r"[A-Za-z0-9]+", re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", name or "app"))
    return sep.join(w.lower() for w in words) or "app"


def _write(out: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def _nextjs(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    name = _slug(models["domain"].name, "-")
    package = {
        "name": name,
        "version": "0.1.0",
        "private": True,
        "scripts": {"dev": "next dev", "build": "next build", "start": "next start", "lint": "next lint"},
        "dependencies": {"next": "^15.0.0", "react": "^19.0.0", "react-dom": "^19.0.0"},
        "devDependencies": {"typescript": "^5.4.0", "@types/node": "^20.0.0", "@types/react": "^19.0.0",
                            "@types/react-dom": "^19.0.0"},
    }
    tsconfig = {
        "compilerOptions": {
            "target": "ES2017", "lib": ["dom", "dom.iterable", "esnext"], "allowJs": False, "skipLibCheck": True,
            "strict": True, "noEmit": True, "esModuleInterop": True, "module": "esnext", "moduleResolution": "bundler",
            "resolveJsonModule": True, "isolatedModules": True, "jsx": "preserve", "incremental": True,
            "plugins": [{"name": "next"}], "paths": {"@/*": ["./*"]},
        },
        "include": ["next-env.d.ts", "**/*.ts", "**/*.tsx", ".next/types/**/*.ts"],
        "exclude": ["node_modules"],
    }
    _write(out, {
        "package.json": json.dumps(package, indent=2) + "\n",
        "tsconfig.json": json.dumps(tsconfig, indent=2) + "\n",
        "next-env.d.ts": '/// <reference types="next" />\n/// <reference types="next/image-types/global" />\n',
        "next.config.mjs": "/** @type {import('next').NextConfig} */\nconst nextConfig = {};\nexport default nextConfig;\n",
    })


def _rust(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    name = _slug(models["domain"].name, "_")
    _write(out, {"Cargo.toml": (
        f'[package]\nname = "{name}"\nversion = "0.1.0"\nedition = "2021"\n\n'
        '[dependencies]\naxum = "0.7"\ntokio = { version = "1", features = ["full"] }\n'
        'serde = { version = "1", features = ["derive"] }\nserde_json = "1"\n'
    )})


def _kotlin_spring(models: dict[str, Any], out: Path, o: NoOptions) -> None:
    name = _slug(models["domain"].name, "-")
    _write(out, {
        "settings.gradle.kts": f'rootProject.name = "{name}"\n',
        "build.gradle.kts": (
            'plugins {\n    kotlin("jvm") version "1.9.25"\n    kotlin("plugin.spring") version "1.9.25"\n'
            '    kotlin("plugin.jpa") version "1.9.25"\n    id("org.springframework.boot") version "3.3.5"\n'
            '    id("io.spring.dependency-management") version "1.1.6"\n}\n\n'
            'group = "com.example"\nversion = "0.1.0"\n\njava {\n    toolchain {\n'
            '        languageVersion = JavaLanguageVersion.of(17)\n    }\n}\n\nrepositories {\n    mavenCentral()\n}\n\n'
            'dependencies {\n    implementation("org.springframework.boot:spring-boot-starter-web")\n'
            '    implementation("org.springframework.boot:spring-boot-starter-data-jpa")\n'
            '    implementation("com.fasterxml.jackson.module:jackson-module-kotlin")\n'
            '    implementation("org.jetbrains.kotlin:kotlin-reflect")\n    runtimeOnly("com.h2database:h2")\n'
            '    testImplementation("org.springframework.boot:spring-boot-starter-test")\n}\n\n'
            'kotlin {\n    compilerOptions {\n        freeCompilerArgs.addAll("-Xjsr305=strict")\n    }\n}\n'
        ),
    })


_DOMAIN = frozenset({"domain"})

METADATA_TARGETS: tuple[GeneratorSpec, ...] = (
    GeneratorSpec("nextjs", "Next.js build files", "package.json, tsconfig.json, next-env.d.ts, next.config.mjs.",
                  NoOptions, _DOMAIN, "", _nextjs, kind="metadata", stack=("nextjs", "react", "typescript", "frontend")),
    GeneratorSpec("rust", "Rust build files", "Cargo.toml (axum, tokio, serde).",
                  NoOptions, _DOMAIN, "", _rust, kind="metadata", stack=("rust", "backend")),
    GeneratorSpec("kotlin_spring", "Kotlin/Spring build files", "settings.gradle.kts and build.gradle.kts (Spring Boot).",
                  NoOptions, _DOMAIN, "", _kotlin_spring, kind="metadata", stack=("kotlin", "spring", "backend")),
)
