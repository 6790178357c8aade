# rmqstore: `make run` opens the browser, `make test` runs the whole suite.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
STORE  ?=
QUICK  ?=
JAVA_LIB ?=

export SPARK_LOCAL_IP ?= 127.0.0.1

.PHONY: run test bench package soak system-deps clean screenshots compiler

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

run: $(STAMP)
	@if [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ] && [ -z "$$QT_QPA_PLATFORM" ]; then \
	  echo "no display found: starting offscreen (set DISPLAY, or use xvfb-run make run)"; \
	  QT_QPA_PLATFORM=offscreen $(PY) -m gui.app $(STORE); \
	else $(PY) -m gui.app $(STORE); fi

# tests render offscreen; `make run` uses the desktop's display (offscreen only when there is none)
# the pure-Python twins of the compiled paths answer the conformance, write-path, index-geometry
# and check tests too (first, so the whole suite's summary is the last line)
TWIN_TESTS := tests/test_conformance_read.py tests/test_write_path.py tests/test_index_geometry.py \
              tests/test_check.py tests/test_first_contact.py tests/test_expired_and_late_queues.py \
              tests/test_analysis.py tests/internals/test_analysis_oracles.py tests/test_recovery_plan.py \
              tests/test_cli_internals.py tests/gui/test_gui_table_pages.py tests/test_query_kernel.py tests/test_message_kernel.py tests/test_dledger.py tests/test_dledger_real.py \
              tests/test_lmq_batchcq_read.py tests/test_lmq_batchcq_write.py tests/test_decode_kernel.py tests/test_query_batch.py
test: $(STAMP) system-deps
	$(VENV)/bin/lint-imports
	RMQSTORE_PURE_PYTHON=1 QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider $(TWIN_TESTS)
	QT_QPA_PLATFORM=offscreen RMQSTORE_PACKAGE_TEST=1 $(PY) -m pytest -q tests

# the README's pictures: the GUI tests save them to build/screenshots; this refreshes docs/
SHOTS := browser-main browser-detail browser-detail-times browser-search browser-overview store-settings store-tree segment-fill cq-units slot-heatmap collision-chain scan-panel scan-panel-topics open-progress scan-panel-progress timer-messages timer-wheel store-compare overview-generation
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
	rm -rf build dist $(VENV) *.egg-info
