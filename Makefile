# rmqstore: `make run` opens the browser, `make test` runs the whole suite, `make test-fast` the edit loop's part.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
STORE  ?=
QUICK  ?=
JAVA_LIB ?=

export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: run test test-fast test-py313 bench package soak system-deps gui-deps test-deps install clean screenshots compiler

# the engine's fast paths are compiled at install (Cython -> C): a C compiler is needed
compiler:
	@if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a C compiler for the compiled fast paths (gcc)"; \
	    apt-get install -y -q gcc >/dev/null 2>&1 || \
	      (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q gcc >/dev/null 2>&1) || \
	      echo "WARNING: could not install gcc: the engine will run its pure-Python code"; \
	  else echo "WARNING: no C compiler (cc/gcc): the engine will run its pure-Python code"; fi; \
	fi

$(STAMP): pyproject.toml setup.py $(wildcard engine/accel/*.pyx engine/accel/*.pxi engine/accel/*.pxd engine/format/*.pxd) | compiler
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@$(PY) -c "import engine.accel as a; m = [k for k, v in a.status().items() if not v]; \
	  print('compiled fast paths: ' + ('built (' + ', '.join(a.MODULES) + ')' if not m else \
	  'WARNING not built: ' + ', '.join(m) + ' -- needs a C compiler and the Python headers (Debian: gcc python3-dev);' \
	  ' the engine runs its pure-Python code, 10-30x slower, and make test fails on it'))"
	@touch $(STAMP)

# Spark needs a JRE; screenshots of CJK keys need a CJK font. Install them when
# we can (root + apt), otherwise say what is missing and carry on.
system-deps:
	@if ! command -v java >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing a JRE for Spark (openjdk-17-jre-headless)"; \
	    apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1 || \
	      (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q openjdk-17-jre-headless >/dev/null 2>&1) || \
	      echo "WARNING: could not install a JRE: Spark scans and their tests will be skipped"; \
	  else echo "WARNING: no 'java' on PATH: install a JRE 17 to run Spark scans"; fi; \
	fi
	@if ! fc-list 2>/dev/null | grep -qi 'emoji'; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q fonts-noto-color-emoji >/dev/null 2>&1 || true; \
	  fi; \
	fi
	@if ! fc-list 2>/dev/null | grep -qiE 'cjk|wqy'; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q fonts-noto-cjk >/dev/null 2>&1 || \
	      echo "note: fonts-noto-cjk not installed: CJK keys render as boxes in screenshots"; \
	  fi; \
	fi

# Qt's X11 platform plugin (PySide6's libqxcb.so) and the libraries it links (`ldd` of it), by
# their Debian/Ubuntu package names: without one of them Qt aborts (exit 134) on a desktop.
XCB_DEBS := libxcb1 libx11-6 libx11-xcb1 libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 \
            libxcb-randr0 libxcb-render0 libxcb-render-util0 libxcb-shape0 libxcb-shm0 libxcb-sync1 \
            libxcb-util1 libxcb-xfixes0 libxcb-xkb1 libxkbcommon0 libxkbcommon-x11-0 libegl1 libgl1 \
            libfontconfig1 libfreetype6 libdbus-1-3 libglib2.0-0
QXCB = $(firstword $(wildcard $(VENV)/lib/python*/site-packages/PySide6/Qt/plugins/platforms/libqxcb.so))
# the libraries the plugin cannot find (empty: it loads)
XCB_MISSING = ldd $(QXCB) 2>/dev/null | awk '/not found/ {print $$1}' | sort -u | tr '\n' ' '

# install Qt's X11 libraries when some are missing (root + apt), else name them
gui-deps: $(STAMP)
	@if [ -n "$(QXCB)" ] && [ -n "$$($(XCB_MISSING))" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing the X11 libraries of Qt's xcb platform: $(XCB_DEBS)"; \
	    apt-get install -y -q $(XCB_DEBS) >/dev/null 2>&1 || \
	      (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $(XCB_DEBS) >/dev/null 2>&1) || true; \
	  fi; \
	  missing="$$($(XCB_MISSING))"; \
	  if [ -n "$$missing" ]; then \
	    echo "WARNING: Qt's X11 (xcb) platform cannot load; missing: $$missing"; \
	    echo "  install them (Debian/Ubuntu): sudo apt-get install $(XCB_DEBS)"; \
	  fi; \
	fi

# the tests' extras: Xvfb, for the test that runs the browser on a real X server (tests/gui/test_gui_xcb.py)
test-deps: system-deps gui-deps
	@if ! command -v Xvfb >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Xvfb for the X11 test (xvfb)"; \
	    apt-get install -y -q xvfb >/dev/null 2>&1 || \
	      (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q xvfb >/dev/null 2>&1) || \
	      echo "WARNING: could not install Xvfb: the X11 test will be skipped"; \
	  else echo "note: no Xvfb (Debian: xvfb): the X11 test will be skipped"; fi; \
	fi

# on the desktop's display; offscreen (no window) only when there is no display or Qt's X11
# libraries are missing, and then it says so. No STORE: the demo store, written on first use.
run: $(STAMP) system-deps gui-deps
	@if [ -z "$(STORE)" ]; then \
	  echo "no STORE given: opening the demo store, $${XDG_DATA_HOME:-$$HOME/.local/share}/rmqstore/rmqstore-browser/demo-store (written on first use)"; \
	fi; \
	if [ -n "$$QT_QPA_PLATFORM" ]; then $(PY) -m gui.app $(STORE); \
	elif [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
	  echo "no display found (DISPLAY and WAYLAND_DISPLAY are unset): starting offscreen, NO WINDOW will show;"; \
	  echo "  run it from a desktop's terminal, or on a headless machine: xvfb-run -a make run"; \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.app $(STORE); \
	elif [ -z "$$WAYLAND_DISPLAY" ] && [ -n "$$($(XCB_MISSING))" ]; then \
	  echo "Qt's X11 platform cannot load (missing: $$($(XCB_MISSING))): starting offscreen, NO WINDOW will show;"; \
	  echo "  install them (Debian/Ubuntu): sudo apt-get install $(XCB_DEBS)"; \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.app $(STORE); \
	else $(PY) -m gui.app $(STORE); fi

# `rmqstore` and `rmqstore-browser` on PATH: links in ~/.local/bin to this checkout's .venv/bin
BINDIR ?= $(HOME)/.local/bin
install: $(STAMP)
	@mkdir -p $(BINDIR)
	@for n in rmqstore rmqstore-browser; do ln -sf $(CURDIR)/$(VENV)/bin/$$n $(BINDIR)/$$n; echo "$(BINDIR)/$$n -> $(CURDIR)/$(VENV)/bin/$$n"; done
	@case ":$$PATH:" in *":$(BINDIR):"*) ;; \
	  *) echo "note: $(BINDIR) is not on PATH: add  export PATH=\"$(BINDIR):\$$PATH\"  to ~/.profile";; esac

# tests render offscreen; `make run` uses the desktop's display (offscreen only when there is none)
# the pure-Python twins of the compiled paths answer the conformance, write-path, index-geometry
# and check tests too (first, so the whole suite's summary is the last line).
# Times here (2 cores, README "Tests"): pure-Python pass 88 s idle (102 s at load 3.8), whole
# suite 1,025 s idle before issue 31's trims (the Spark JVM started once a run, the wheel test's
# second compile of the kernels gone, Spark jobs asserted twice run once), 978 s after them at
# load 1-2. On two xdist workers, idle: `make test` 10 min 5 s (pure-Python pass 54 s, whole
# suite 549 s); a clean clone's .ci/run 15 min 2 s with both venvs' installs and the 3.13 leg.
TWIN_TESTS := tests/test_conformance_read.py tests/test_write_path.py tests/test_index_geometry.py \
              tests/test_check.py tests/test_first_contact.py tests/test_expired_and_late_queues.py \
              tests/test_analysis.py tests/internals/test_analysis_oracles.py tests/test_recovery_plan.py \
              tests/test_cli_internals.py tests/gui/test_gui_table_pages.py tests/test_query_kernel.py tests/test_message_kernel.py tests/test_dledger.py tests/test_dledger_real.py \
              tests/test_lmq_batchcq_read.py tests/test_lmq_batchcq_write.py tests/test_decode_kernel.py tests/test_query_batch.py tests/test_lineage.py tests/test_body_decode.py \
              tests/test_tiered.py tests/test_compaction.py tests/test_tiered_scan.py tests/test_tiered_local_index.py \
              tests/test_compaction_no_log.py tests/test_store_view.py tests/test_get_result.py \
              tests/test_differential.py tests/test_rocksdb_cq.py
# Both passes run on WORKERS pytest-xdist processes (tests/conftest.py: every Spark test on one
# worker, in its order, handed out first; each other file's tests together); WORKERS=0 runs them
# in this process, one after the other.
WORKERS ?= 2
XDIST   := $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadgroup)
test: $(STAMP) test-deps
	$(VENV)/bin/lint-imports
	RMQSTORE_PURE_PYTHON=1 QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider $(XDIST) $(TWIN_TESTS)
	QT_QPA_PLATFORM=offscreen RMQSTORE_PACKAGE_TEST=1 $(PY) -m pytest -q $(XDIST) tests

# the edit loop: the compiled build only, no pure-Python pass, and none of the tests marked slow
# (tests/conftest.py's SLOW: the packaging builds, the reliability runs, every Spark test and the
# ones that took 2 s or more); `make test` before a commit runs them all
test-fast: $(STAMP)
	$(VENV)/bin/lint-imports
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider -m "not slow" tests

# CPython 3.13, the newest that PyPI's PySide6 and pyspark support: the compiled build's
# conformance and kernel tests (engine only, no GUI) in a venv of its own, .venv313, whose
# install compiles the Cython kernels for 3.13 (next to the 3.11 ones, by ABI tag): this is the
# leg that says when a CPython release breaks the compiled build. CI runs it after `make test` (.ci/run); ~2 min
# here once the venv is made (its first install: ~4 min).
# (the first python3.13 that runs: PATH's, then pyenv's; a pyenv shim on PATH fails unless selected)
PYTHON313 ?= $(shell for p in "$$(command -v python3.13)" $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13); do \
               [ -n "$$p" ] && "$$p" -c "" 2>/dev/null && { echo "$$p"; break; }; done)
VENV313   := .venv313
PY313     := $(VENV313)/bin/python
STAMP313  := $(VENV313)/.installed
PY313_TESTS := tests/test_conformance_read.py tests/test_differential.py tests/accel $(wildcard tests/test_*kernel*.py) tests/test_write_path.py \
               tests/test_index_geometry.py tests/test_format_layout.py tests/test_index_accel.py \
               tests/test_index_accel_build.py tests/test_query_batch.py tests/test_lmq_batchcq_read.py \
               tests/test_dledger_real.py tests/test_recovery_plan.py tests/test_body_decode.py tests/test_store_view.py

$(STAMP313): pyproject.toml setup.py $(wildcard engine/accel/*.pyx engine/accel/*.pxi engine/accel/*.pxd engine/format/*.pxd) | compiler
	@if [ -z "$(PYTHON313)" ]; then echo "no python3.13 found (PATH, ~/.pyenv/versions): make test-py313 PYTHON313=/path/to/python3.13"; exit 2; fi
	@test -x $(PY313) || $(PYTHON313) -m venv $(VENV313)
	$(PY313) -m pip install -q --upgrade pip
	$(PY313) -m pip install -q -e '.[test]'
	@touch $(STAMP313)

test-py313: $(STAMP313)
	@$(PY313) -c "import sys, engine.accel as a; m = [k for k, v in a.status().items() if not v]; \
	  sys.exit('compiled fast paths NOT built for ' + sys.version.split()[0] + ': ' + ', '.join(m)) if m else \
	  print('compiled fast paths on ' + sys.version.split()[0] + ': ' + ', '.join(a.MODULES))"
	QT_QPA_PLATFORM=offscreen $(PY313) -m pytest -q -p no:cacheprovider $(PY313_TESTS)

# the README's pictures: the GUI tests save them to build/screenshots; this refreshes docs/
SHOTS := xcb-browser decoded-body scan-panel-columns browser-main browser-detail browser-detail-times browser-search browser-overview store-settings store-tree segment-fill cq-units slot-heatmap collision-chain scan-panel scan-panel-topics open-progress scan-panel-progress timer-messages timer-wheel store-compare overview-generation
screenshots: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q tests/gui tests/internals tests/scan/test_scan_panel.py
	mkdir -p docs/screenshots
	for n in $(SHOTS); do cp build/screenshots/$$n.png docs/screenshots/; done

# JAVA_LIB=DIR (RocketMQ 4.9.7's lib/ jars) adds the side-by-side java section (bench/README.md)
bench: $(STAMP)
	$(PY) -m bench $(if $(QUICK),--quick,) $(if $(JAVA_LIB),--java-lib $(JAVA_LIB),)

# the long reliability run; prints the power-loss and verdict-fuzz figures (docs/reliability.md, "Soak figures")
soak: $(STAMP)
	@$(PY) -m pytest -q tests/reliability --soak; status=$$?; \
	$(PY) -c "import json; c = json.load(open('build/reliability/soak-report.json'))['categories']; \
	p = c.get('powerloss/states', {}); v = c.get('fuzz/verdict', {}); \
	print('power loss: %s states tried, %s acknowledged messages lost, %s states failed' % (p.get('statesTried'), p.get('ackedLost'), p.get('failures'))); \
	print('verdict fuzz: %s cases tried, %s reader-visible, %s false OKs (%s in known check gaps, %s format-blind)' % (v.get('casesTried'), v.get('readerVisible'), v.get('falseOk'), v.get('falseOkKnownCheckGaps'), v.get('falseOkFormatBlind')))" || true; \
	exit $$status

package: $(STAMP)
	@if ! ldconfig -p 2>/dev/null | grep -q libxcb-icccm.so.4; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q libxcb-icccm4 libxcb-keysyms1 >/dev/null 2>&1 || \
	      echo "note: libxcb-icccm4/libxcb-keysyms1 not installed: the bundle's X11 plugin needs them on the target"; \
	  else echo "note: install libxcb-icccm4 libxcb-keysyms1 to bundle them (the X11 plugin needs them)"; fi; \
	fi
	$(PY) -m pip install -q 'pyinstaller>=6.0,<7'
	$(VENV)/bin/pyinstaller --noconfirm packaging/rmqstore.spec --distpath dist --workpath build/pyinstaller
	@du -sh dist/rmqstore-browser
	dist/rmqstore-browser/rmqstore-browser --version
	dist/rmqstore-browser/rmqstore --version

clean:
	rm -rf build dist $(VENV) $(VENV313) *.egg-info
