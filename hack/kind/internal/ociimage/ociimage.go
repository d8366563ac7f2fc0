// Package ociimage builds single-binary container images without a Docker daemon: a static
// binary on an empty base (or on one base layer given as a tar, e.g. the few Debian packages
// kube-proxy runs; or that base layer alone, e.g. a busybox root filesystem), written as an OCI image-layout tar archive that `kind load image-archive`
// (containerd's `ctr images import`) accepts, or as a `docker save` archive that `docker load`
// accepts too (WriteDockerArchive).
package ociimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI image-spec label and annotation keys the images carry.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelTitle    = "org.opencontainers.image.title"
	LabelSource   = "org.opencontainers.image.source"
	// annotationContainerdName is the full image reference containerd's importer names the
	// image after (it takes precedence over the OCI ref name, which holds only the tag).
	annotationContainerdName = "io.containerd.image.name"
	annotationRefName        = "org.opencontainers.image.ref.name"
)

// Spec describes one image.
type Spec struct {
	// Binary is the path of a static Linux executable; it becomes /<base name> in the image
	// and the image's entrypoint. Empty (only with BaseLayer and Cmd): the image is the base
	// layer alone, with no entrypoint, and Cmd is its whole default command (as Docker's
	// busybox image, CMD ["sh"]).
	Binary string
	// Ref is the image reference the archive names, e.g. localhost/fakecloud-csi/driver:dev;
	// it must have a tag.
	Ref string
	// Arch is the GOARCH the binary was built for (amd64, arm64, ...).
	Arch string
	// Version and Commit are stamped into the labels LabelVersion and LabelRevision.
	Version, Commit string
	// Source is the LabelSource URL; empty leaves it out.
	Source string
	// Created is the image's creation time; the zero value gives the Unix epoch, so that the
	// same binary always gives the same image digest.
	Created time.Time
	// Dir is the absolute folder the binary goes in; empty means "/". Images whose users run
	// the binary by name (kubeadm's static pods run "kube-apiserver", "etcd") put it in
	// /usr/local/bin and set PATH in Env.
	Dir string
	// BaseLayer is the path of an uncompressed tar that becomes the image's first layer, under
	// the binary's; empty means none (an empty base).
	BaseLayer string
	// Env is the image's environment, KEY=VALUE each, in order.
	Env []string
	// Cmd is the image's default arguments (OCI config Cmd): what runs after the entrypoint
	// when a container gives no args (agnhost's CMD ["pause"]), or the whole default command
	// of an image without Binary.
	Cmd []string
	// Title is the LabelTitle; empty: the binary's base name, or the reference's last path
	// element for an image without Binary.
	Title string
}

// Validate reports every problem of s at once (errors.Join); nil when s is usable.
func (s Spec) Validate() error {
	var errs []error
	if s.Binary == "" {
		if s.BaseLayer == "" || len(s.Cmd) == 0 {
			errs = append(errs, errors.New("binary path is empty (an image without a binary needs a base layer and a cmd)"))
		}
	} else if st, err := os.Stat(s.Binary); err != nil {
		errs = append(errs, fmt.Errorf("binary: %w", err))
	} else if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		errs = append(errs, fmt.Errorf("binary %s is not an executable file", s.Binary))
	}
	if _, err := name.NewTag(s.Ref, name.StrictValidation); err != nil {
		errs = append(errs, fmt.Errorf("image reference %q needs an explicit registry/repository:tag: %w", s.Ref, err))
	}
	if s.Arch == "" {
		errs = append(errs, errors.New("architecture is empty"))
	}
	if s.Version == "" || s.Commit == "" {
		errs = append(errs, errors.New("version and commit must be set"))
	}
	if s.Dir != "" && (!path.IsAbs(s.Dir) || path.Clean(s.Dir) != s.Dir) {
		errs = append(errs, fmt.Errorf("dir %q is not a clean absolute path", s.Dir))
	}
	if s.BaseLayer != "" {
		if st, err := os.Stat(s.BaseLayer); err != nil {
			errs = append(errs, fmt.Errorf("base layer: %w", err))
		} else if !st.Mode().IsRegular() {
			errs = append(errs, fmt.Errorf("base layer %s is not a file", s.BaseLayer))
		}
	}
	for _, e := range s.Env {
		if k, _, ok := strings.Cut(e, "="); !ok || k == "" {
			errs = append(errs, fmt.Errorf("env %q is not KEY=VALUE", e))
		}
	}
	return errors.Join(errs...)
}

// Entrypoint is the path of the binary inside the image: Dir (default "/") + its base name;
// "" for an image without Binary.
func (s Spec) Entrypoint() string {
	if s.Binary == "" {
		return ""
	}
	dir := s.Dir
	if dir == "" {
		dir = "/"
	}
	return path.Join(dir, filepath.Base(s.Binary))
}

// Build returns the image of s: the base layer if any, then one layer holding the binary
// (mode 0755, owned by root, with its parent folders) unless s has none, an OCI manifest and
// config with entrypoint, cmd, environment, labels, linux/<Arch>.
func Build(s Spec) (v1.Image, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	created := s.Created
	if created.IsZero() {
		created = time.Unix(0, 0).UTC()
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	if s.BaseLayer != "" {
		base, err := tarball.LayerFromFile(s.BaseLayer, tarball.WithMediaType(types.OCILayer))
		if err != nil {
			return nil, fmt.Errorf("base layer %s: %w", s.BaseLayer, err)
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: base, History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "fakecloud-csi hack/kind ociimage: ADD " + filepath.Base(s.BaseLayer) + " /",
		}})
		if err != nil {
			return nil, fmt.Errorf("append base layer: %w", err)
		}
	}
	title := s.Title
	if s.Binary != "" {
		layer, err := binaryLayer(s, created)
		if err != nil {
			return nil, err
		}
		img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "fakecloud-csi hack/kind ociimage: COPY " + filepath.Base(s.Binary) + " " + s.Entrypoint(),
		}})
		if err != nil {
			return nil, fmt.Errorf("append layer: %w", err)
		}
		if title == "" {
			title = strings.TrimPrefix(s.Entrypoint(), "/")
		}
	} else if title == "" {
		// Validate checked the reference.
		tag, _ := name.NewTag(s.Ref, name.StrictValidation)
		title = path.Base(tag.RepositoryStr())
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", s.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config.Entrypoint = nil
	if s.Binary != "" {
		cf.Config.Entrypoint = []string{s.Entrypoint()}
	}
	cf.Config.Cmd = append([]string(nil), s.Cmd...)
	cf.Config.Env = append([]string(nil), s.Env...)
	cf.Config.Labels = map[string]string{
		LabelVersion:  s.Version,
		LabelRevision: s.Commit,
		LabelTitle:    title,
	}
	if s.Source != "" {
		cf.Config.Labels[LabelSource] = s.Source
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("set config: %w", err)
	}
	return img, nil
}

// binaryLayer is the layer of s.Binary at s.Entrypoint(), with its parent folders first so
// that it unpacks on an empty base too.
func binaryLayer(s Spec, created time.Time) (v1.Layer, error) {
	bin, err := os.ReadFile(s.Binary)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	var parents []string
	for d := path.Dir(s.Entrypoint()); d != "/"; d = path.Dir(d) {
		parents = append([]string{d}, parents...)
	}
	for _, d := range parents {
		if err := tw.WriteHeader(&tar.Header{
			Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: created,
			Typeflag: tar.TypeDir, Format: tar.FormatPAX,
		}); err != nil {
			return nil, fmt.Errorf("layer header: %w", err)
		}
	}
	hdr := &tar.Header{
		Name:     strings.TrimPrefix(s.Entrypoint(), "/"),
		Mode:     0o755,
		Size:     int64(len(bin)),
		ModTime:  created,
		Typeflag: tar.TypeReg,
		Format:   tar.FormatPAX,
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, fmt.Errorf("layer header: %w", err)
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, fmt.Errorf("layer content: %w", err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer: %w", err)
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return layer, nil
}

// WriteArchive writes img as an OCI image-layout tar at out, naming it ref in the index
// annotations the way `docker save` does (containerd name = full reference, OCI ref name =
// tag). out is replaced atomically.
func WriteArchive(img v1.Image, ref, out string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	dir, err := os.MkdirTemp("", "ociimage-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{
		annotationContainerdName: tag.Name(),
		annotationRefName:        tag.TagStr(),
	})); err != nil {
		return fmt.Errorf("write image to layout: %w", err)
	}
	return writeAtomically(out, func(w io.Writer) error { return tarDir(w, dir) })
}

// WriteDockerArchive writes img as a `docker save` archive (manifest.json, repositories) at
// out, tagged ref, which `docker load`, `ctr images import` and kind's node-image builder read.
// out is replaced atomically.
func WriteDockerArchive(img v1.Image, ref, out string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	return writeAtomically(out, func(w io.Writer) error { return tarball.Write(tag, img, w) })
}

// writeAtomically writes an archive with write into a temporary file beside out, mode 0644,
// and renames it to out, so that a reader never sees half an archive.
func writeAtomically(out string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(out), ".ociimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := write(tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("archive %s: %w", out, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), out)
}

// tarDir writes the regular files and directories under dir into w, in lexical order, with
// paths relative to dir and fixed ownership and times.
func tarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if d.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		hdr.Mode = 0o644
		if d.IsDir() {
			hdr.Mode = 0o755
		}
		hdr.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// ReadArchive unpacks an archive written by WriteArchive (or any OCI layout tar) into the
// empty folder dir, which must outlive the returned image, and returns the image the index
// names ref (io.containerd.image.name). Errors: not a tar, no OCI layout, no image of that
// name.
func ReadArchive(archive, ref, dir string) (v1.Image, error) {
	if err := untar(archive, dir); err != nil {
		return nil, fmt.Errorf("unpack %s: %w", archive, err)
	}
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("%s is not an OCI layout: %w", archive, err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Annotations[annotationContainerdName] != ref {
			continue
		}
		return idx.Image(d.Digest)
	}
	return nil, fmt.Errorf("%s holds no image named %s", archive, ref)
}

func untar(archive, dir string) error {
	f, err := os.Open(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		clean := path.Clean(hdr.Name)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return fmt.Errorf("unsafe path %q in archive", hdr.Name)
		}
		target := filepath.Join(dir, filepath.FromSlash(clean))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}

// ExtractFile returns the content of the file at p (absolute, e.g. "/driver") in img's
// flattened filesystem. Errors: p absent.
func ExtractFile(img v1.Image, p string) ([]byte, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	want := strings.TrimPrefix(path.Clean(p), "/")
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s not in image", p)
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(path.Clean(hdr.Name), "/") == want && hdr.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}
