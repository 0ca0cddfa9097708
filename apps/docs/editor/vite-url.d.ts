// Vite's `?url` import: the URL of the file, copied into the built site as it is.
declare module '*?url' {
  const url: string
  export default url
}
