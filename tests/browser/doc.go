// Package browser tests the fake cloud's web console (GET /ui) in a real headless Chromium,
// driven with chromedp. It is a module of its own so that chromedp stays out of the main
// module's dependency graph. Run it with `make test-browser`; it skips when no Chromium is
// installed (Debian: apt-get install -y --no-install-recommends chromium).
package browser
